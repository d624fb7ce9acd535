/**
 * Parcel desk: a courier's customer assistant written in TypeScript on the openai npm package,
 * as its users write it.
 *
 * A plain chat-completions loop: the model asks for tools (parcel tracking, free delivery
 * slots, rescheduling; deterministic in-file data), the loop runs each one and sends its result
 * back, until the model answers in text. With `stream: true` in the case's context every model
 * call streams (server-sent events) and the loop puts the answer together from its deltas.
 *
 * agentbench runs it once per user turn (`agent: {command: [node, --import, tsx, agent.ts]}`):
 * the turn comes on stdin as JSON (`input`: the question, or the conversation so far from turn 2
 * on; `context`: the case's variables), the client finds its record/replay server in
 * OPENAI_BASE_URL and OPENAI_API_KEY, the model name in AGENTBENCH_MODEL, and the answer is what
 * it prints.
 */

import OpenAI from "openai";
import type {
  ChatCompletionMessageParam,
  ChatCompletionTool,
} from "openai/resources/chat/completions";

const SYSTEM_PROMPT =
  "You are the parcel desk of Swift Couriers, helping {customer}. Use the tools to track " +
  "parcels and to move deliveries; never guess a status, a date or a delivery slot.";
const MAX_MODEL_CALLS = 8;

interface Parcel {
  status: string;
  location: string;
  eta: string;
  postcode: string;
}

const PARCELS: Record<string, Parcel> = {
  "PX-1001": {
    status: "out for delivery",
    location: "Lisbon depot",
    eta: "2026-07-14",
    postcode: "1100-148",
  },
  "PX-2002": {
    status: "in transit",
    location: "Madrid hub",
    eta: "2026-07-16",
    postcode: "4050-262",
  },
};
const SLOTS: Record<string, string[]> = {
  "1100-148": ["18:00-21:00"],
  "4050-262": ["09:00-12:00", "14:00-17:00"],
};

type Result = Record<string, unknown>;

function trackParcel(args: { tracking_id: string }): Result {
  const id = args.tracking_id.toUpperCase();
  const parcel = PARCELS[id];
  if (!parcel) return { error: `no parcel ${id} on file` };
  return { tracking_id: id, ...parcel };
}

function deliverySlots(args: { postcode: string; date: string }): Result {
  const slots = SLOTS[args.postcode];
  if (!slots) return { error: `we do not deliver to ${args.postcode}` };
  return { postcode: args.postcode, date: args.date, slots };
}

function rescheduleDelivery(args: { tracking_id: string; date: string; slot: string }): Result {
  const parcel = PARCELS[args.tracking_id.toUpperCase()];
  if (!parcel) return { error: `no parcel ${args.tracking_id} on file` };
  if (!(SLOTS[parcel.postcode] ?? []).includes(args.slot)) {
    return { error: `slot ${args.slot} is not offered for ${parcel.postcode}` };
  }
  const reference = `RS-${args.tracking_id.toUpperCase()}-${args.date.slice(5).replace("-", "")}`;
  return { reference, tracking_id: args.tracking_id, date: args.date, slot: args.slot };
}

const TOOLS: ChatCompletionTool[] = [
  {
    type: "function",
    function: {
      name: "track_parcel",
      description: "Where a parcel is, its status and expected delivery date.",
      parameters: {
        type: "object",
        properties: {
          tracking_id: { type: "string", description: "Tracking number, e.g. PX-1001" },
        },
        required: ["tracking_id"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "delivery_slots",
      description: "Free delivery slots for a postcode on a day.",
      parameters: {
        type: "object",
        properties: {
          postcode: { type: "string" },
          date: { type: "string", description: "YYYY-MM-DD" },
        },
        required: ["postcode", "date"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "reschedule_delivery",
      description: "Move a parcel's delivery to a free slot; returns the reference.",
      parameters: {
        type: "object",
        properties: {
          tracking_id: { type: "string" },
          date: { type: "string", description: "YYYY-MM-DD" },
          slot: { type: "string", description: "A slot delivery_slots offered, e.g. 09:00-12:00" },
        },
        required: ["tracking_id", "date", "slot"],
      },
    },
  },
];

const FUNCTIONS: Record<string, (args: any) => Result> = {
  track_parcel: trackParcel,
  delivery_slots: deliverySlots,
  reschedule_delivery: rescheduleDelivery,
};

interface Call {
  id: string;
  name: string;
  arguments: string;
}

interface Answer {
  message: ChatCompletionMessageParam;
  text: string;
  calls: Call[];
}

function runTool(call: Call): string {
  const tool = FUNCTIONS[call.name];
  let result: Result;
  try {
    result = tool ? tool(JSON.parse(call.arguments || "{}")) : { error: `no tool ${call.name}` };
  } catch (error) {
    // The model sees what went wrong and can correct itself.
    result = { error: String(error) };
  }
  return JSON.stringify(result);
}

async function complete(
  client: OpenAI,
  model: string,
  messages: ChatCompletionMessageParam[],
  stream: boolean,
): Promise<Answer> {
  if (!stream) {
    const response = await client.chat.completions.create({ model, messages, tools: TOOLS });
    const message = response.choices[0].message;
    const calls = (message.tool_calls ?? []).flatMap((c) =>
      c.type === "function"
        ? [{ id: c.id, name: c.function.name, arguments: c.function.arguments }]
        : [],
    );
    return { message, text: message.content ?? "", calls };
  }
  const chunks = await client.chat.completions.create({
    model,
    messages,
    tools: TOOLS,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = "";
  const byIndex = new Map<number, Call>();
  for await (const chunk of chunks) {
    const delta = chunk.choices[0]?.delta;
    if (!delta) continue; // the usage chunk at the end
    text += delta.content ?? "";
    for (const piece of delta.tool_calls ?? []) {
      const call = byIndex.get(piece.index) ?? { id: "", name: "", arguments: "" };
      call.id = piece.id ?? call.id;
      call.name += piece.function?.name ?? "";
      call.arguments += piece.function?.arguments ?? "";
      byIndex.set(piece.index, call);
    }
  }
  const calls = [...byIndex.entries()].sort(([a], [b]) => a - b).map(([, call]) => call);
  const message: ChatCompletionMessageParam = {
    role: "assistant",
    content: text || null,
    ...(calls.length
      ? {
          tool_calls: calls.map((c) => ({
            id: c.id,
            type: "function" as const,
            function: { name: c.name, arguments: c.arguments },
          })),
        }
      : {}),
  };
  return { message, text, calls };
}

async function parcelDesk(turn: Turn): Promise<string> {
  const client = new OpenAI(); // OPENAI_BASE_URL and OPENAI_API_KEY: agentbench's server
  const model = process.env.AGENTBENCH_MODEL ?? turn.model;
  const customer = String(turn.context.customer ?? "the customer");
  const conversation: ChatCompletionMessageParam[] =
    typeof turn.input === "string" ? [{ role: "user", content: turn.input }] : turn.input;
  const messages: ChatCompletionMessageParam[] = [
    { role: "system", content: SYSTEM_PROMPT.replace("{customer}", customer) },
    ...conversation,
  ];
  for (let i = 0; i < MAX_MODEL_CALLS; i++) {
    const answer = await complete(client, model, messages, turn.context.stream === true);
    messages.push(answer.message);
    if (!answer.calls.length) return answer.text;
    for (const call of answer.calls) {
      messages.push({ role: "tool", tool_call_id: call.id, content: runTool(call) });
    }
  }
  throw new Error(`no answer after ${MAX_MODEL_CALLS} model calls`);
}

interface Turn {
  input: string | ChatCompletionMessageParam[];
  context: Record<string, unknown>;
  turn: number;
  model: string;
}

async function readStdin(): Promise<string> {
  let text = "";
  for await (const chunk of process.stdin) text += chunk;
  return text;
}

try {
  const turn = JSON.parse(await readStdin()) as Turn;
  process.stdout.write((await parcelDesk(turn)) + "\n");
} catch (error) {
  // One line the harness keeps as the run's error (a replay refused says why), not a stack.
  console.error(`parcel desk: ${error instanceof Error ? error.message : String(error)}`);
  process.exitCode = 1;
}
