// agentbench report: the case details travel deflated (raw DEFLATE, RFC 1951, then base64),
// about a tenth of their JSON, and are inflated here on the first expansion, synchronously,
// with nothing fetched and no browser API beyond typed arrays. The decoder follows zlib's
// reference decoder `puff.c` (canonical Huffman codes decoded bit by bit).
var agentbenchInflate = (function () {
  "use strict";
  var LENGTH_BASE = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59,
    67, 83, 99, 115, 131, 163, 195, 227, 258];
  var LENGTH_EXTRA = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4,
    5, 5, 5, 5, 0];
  var DIST_BASE = [1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513,
    769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577];
  var DIST_EXTRA = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10,
    11, 11, 12, 12, 13, 13];
  var ORDER = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];

  function huffman(lengths, n) {
    var count = new Uint16Array(16), offsets = new Uint16Array(16), symbol = new Uint16Array(n);
    var i;
    for (i = 0; i < n; i++) { count[lengths[i]]++; }
    count[0] = 0;
    for (i = 1; i < 16; i++) { offsets[i] = offsets[i - 1] + count[i - 1]; }
    for (i = 0; i < n; i++) { if (lengths[i]) { symbol[offsets[lengths[i]]++] = i; } }
    return { count: count, symbol: symbol };
  }

  var fixed = (function () {
    var lengths = new Uint8Array(288), i;
    for (i = 0; i < 144; i++) { lengths[i] = 8; }
    for (; i < 256; i++) { lengths[i] = 9; }
    for (; i < 280; i++) { lengths[i] = 7; }
    for (; i < 288; i++) { lengths[i] = 8; }
    var distances = new Uint8Array(30).fill(5);
    return { lengths: huffman(lengths, 288), distances: huffman(distances, 30) };
  })();

  return function inflate(input) {
    var pos = 0, bitBuffer = 0, bitCount = 0;
    var out = new Uint8Array(Math.max(1024, input.length * 4)), size = 0;

    function need(n) {
      if (size + n <= out.length) { return; }
      var bigger = new Uint8Array(Math.max(out.length * 2, size + n));
      bigger.set(out.subarray(0, size));
      out = bigger;
    }
    function bits(n) {
      while (bitCount < n) {
        if (pos >= input.length) { throw new Error("the details are cut short"); }
        bitBuffer |= input[pos++] << bitCount;
        bitCount += 8;
      }
      var value = bitBuffer & ((1 << n) - 1);
      bitBuffer >>>= n;
      bitCount -= n;
      return value;
    }
    function decode(h) {
      var code = 0, first = 0, index = 0;
      for (var len = 1; len < 16; len++) {
        code |= bits(1);
        var count = h.count[len];
        if (code - count < first) { return h.symbol[index + (code - first)]; }
        index += count;
        first = (first + count) << 1;
        code <<= 1;
      }
      throw new Error("the details hold a code no table has");
    }
    function stored() {
      bitBuffer = 0;
      bitCount = 0;  // the rest of the byte: a stored block starts on the next one
      if (pos + 4 > input.length) { throw new Error("the details are cut short"); }
      var length = input[pos] | (input[pos + 1] << 8);
      pos += 4;
      if (pos + length > input.length) { throw new Error("the details are cut short"); }
      need(length);
      out.set(input.subarray(pos, pos + length), size);
      size += length;
      pos += length;
    }
    function dynamic() {
      var nlen = bits(5) + 257, ndist = bits(5) + 1, ncode = bits(4) + 4, i;
      var lengths = new Uint8Array(320);
      for (i = 0; i < ncode; i++) { lengths[ORDER[i]] = bits(3); }
      var lencode = huffman(lengths, 19);
      lengths = new Uint8Array(320);
      for (i = 0; i < nlen + ndist;) {
        var sym = decode(lencode);
        if (sym < 16) { lengths[i++] = sym; continue; }
        var repeat, value = 0;
        if (sym === 16) {
          if (i === 0) { throw new Error("the details repeat a length before any"); }
          value = lengths[i - 1];
          repeat = 3 + bits(2);
        } else if (sym === 17) {
          repeat = 3 + bits(3);
        } else {
          repeat = 11 + bits(7);
        }
        if (i + repeat > nlen + ndist) { throw new Error("the details have too many lengths"); }
        while (repeat--) { lengths[i++] = value; }
      }
      return {
        lengths: huffman(lengths.subarray(0, nlen), nlen),
        distances: huffman(lengths.subarray(nlen, nlen + ndist), ndist)
      };
    }
    function codes(tables) {
      for (;;) {
        var sym = decode(tables.lengths);
        if (sym < 256) {
          need(1);
          out[size++] = sym;
        } else if (sym === 256) {
          return;
        } else {
          sym -= 257;
          if (sym >= 29) { throw new Error("the details hold a bad length"); }
          var length = LENGTH_BASE[sym] + bits(LENGTH_EXTRA[sym]);
          var dsym = decode(tables.distances);
          if (dsym >= 30) { throw new Error("the details hold a bad distance"); }
          var distance = DIST_BASE[dsym] + bits(DIST_EXTRA[dsym]);
          if (distance > size) { throw new Error("the details reach back too far"); }
          need(length);
          for (var k = 0; k < length; k++) { out[size] = out[size - distance]; size++; }
        }
      }
    }

    var last;
    do {
      last = bits(1);
      var type = bits(2);
      if (type === 0) { stored(); }
      else if (type === 1) { codes(fixed); }
      else if (type === 2) { codes(dynamic()); }
      else { throw new Error("the details hold a block of no known type"); }
    } while (!last);
    return out.subarray(0, size);
  };
})();
if (typeof module !== "undefined") { module.exports = agentbenchInflate; }
