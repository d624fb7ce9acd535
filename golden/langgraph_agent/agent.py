"""Stock desk: a warehouse-inventory assistant written on LangGraph, as its users write it.

A supervisor graph (StateGraph over MessagesState, a ToolNode, `tools_condition`) answers stock
questions and reserves stock for orders; when stock runs short it hands the conversation to a
procurement worker, a compiled sub-graph with its own instructions and tools (supplier quotes),
which answers the user. Tools are plain functions over in-module data. With `stream: true` in
the case's context the graph is run with `.stream(stream_mode="messages")`, as a chat UI does,
and the model's answers arrive token by token.

agentbench calls `stock_desk(input, target)` once per user turn: `target.base_url` is its own
record/replay server, `target.model` the suite's model name, `target.variables` the case's
context.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessageChunk, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.prebuilt import ToolNode, tools_condition

if TYPE_CHECKING:  # agentbench is needed only to test the agent, not to run it
    from agentbench import TargetContext

SUPERVISOR_PROMPT = (
    "You run the stock desk of a parts warehouse. Check stock before you promise anything and "
    "reserve stock only for a named order. When there is not enough stock, transfer to "
    "procurement."
)
PROCUREMENT_PROMPT = (
    "You are the procurement buyer. Get a supplier quote for the shortfall the stock desk "
    "found and tell the user the supplier, the total price and the delivery time."
)

STOCK: dict[str, dict[str, Any]] = {
    "B-108": {"name": "M8 hex bolt, box of 100", "on_hand": 340, "reserved": 40, "bin": "A2-14"},
    "W-220": {"name": "M8 flat washer, box of 200", "on_hand": 75, "reserved": 0, "bin": "A2-15"},
    "H-330": {"name": "hydraulic hose, 2 m", "on_hand": 120, "reserved": 20, "bin": "C1-03"},
}
SUPPLIERS: dict[str, dict[str, Any]] = {
    "H-330": {"supplier": "Nordfast", "unit_price_eur": 18.5, "lead_days": 6},
    "W-220": {"supplier": "Boltworks", "unit_price_eur": 2.1, "lead_days": 3},
}


@tool
def check_stock(sku: str) -> dict[str, Any]:
    """Stock of one part: on hand, reserved, free to promise, and its bin."""
    item = STOCK.get(sku.upper())
    if item is None:
        return {"error": f"unknown SKU {sku}"}
    return {"sku": sku.upper(), **item, "free": item["on_hand"] - item["reserved"]}


@tool
def reserve_stock(sku: str, quantity: int, order_id: str) -> dict[str, Any]:
    """Reserve free stock of a part for a customer order."""
    item = STOCK.get(sku.upper())
    if item is None:
        return {"error": f"unknown SKU {sku}"}
    free = item["on_hand"] - item["reserved"]
    if quantity > free:
        return {"error": f"only {free} of {sku.upper()} free; cannot reserve {quantity}"}
    return {"reservation": f"RS-{order_id}-{sku.upper()}", "quantity": quantity}


@tool
def transfer_to_procurement(shortfall: str) -> str:
    """Hand the conversation to procurement, saying what is short."""
    return "Transferred to procurement."


@tool
def supplier_quote(sku: str, quantity: int) -> dict[str, Any]:
    """A supplier's quote for buying a quantity of a part."""
    offer = SUPPLIERS.get(sku.upper())
    if offer is None:
        return {"error": f"no supplier for {sku}"}
    total = round(offer["unit_price_eur"] * quantity, 2)
    return {"quote": f"Q-{sku.upper()}-{quantity}", **offer, "total_eur": total}


def react_graph(llm: ChatOpenAI, prompt: str, tools: list[Any]) -> StateGraph:
    """A model that calls tools until it answers: the model node, a ToolNode, and a loop."""
    model = llm.bind_tools(tools)

    def call_model(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke([SystemMessage(prompt), *state["messages"]])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", call_model)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition)
    return graph


def transferred(state: MessagesState) -> str:
    """Back to the supervisor after its tools ran, or on to procurement when it transferred."""
    for message in reversed(state["messages"]):
        if not isinstance(message, ToolMessage):
            break
        if message.name == "transfer_to_procurement":
            return "procurement"
    return "model"


def build_graph(llm: ChatOpenAI) -> CompiledStateGraph:
    procurement = react_graph(llm, PROCUREMENT_PROMPT, [supplier_quote])
    procurement.add_edge("tools", "model")
    graph = react_graph(
        llm, SUPERVISOR_PROMPT, [check_stock, reserve_stock, transfer_to_procurement]
    )
    graph.add_node("procurement", procurement.compile())
    graph.add_conditional_edges("tools", transferred, ["model", "procurement"])
    graph.add_edge("procurement", END)
    return graph.compile()


def streamed_answer(desk: CompiledStateGraph, conversation: Any) -> str:
    """What a chat UI shows: each model answer token by token; the last one is the reply."""
    answers: dict[str, str] = {}
    for token, _metadata in desk.stream({"messages": conversation}, stream_mode="messages"):
        if isinstance(token, AIMessageChunk) and isinstance(token.content, str):
            answers[token.id] = answers.get(token.id, "") + token.content
    return [text for text in answers.values() if text][-1]


def stock_desk(input: str | list[dict[str, Any]], target: TargetContext) -> str:
    """One user turn: `input` is the question, or the conversation so far from turn 2 on."""
    llm = ChatOpenAI(base_url=target.base_url, api_key=target.api_key, model=target.model)
    desk = build_graph(llm)
    conversation = [{"role": "user", "content": input}] if isinstance(input, str) else input
    if target.variables.get("stream"):
        return streamed_answer(desk, conversation)
    result = desk.invoke({"messages": conversation})
    return result["messages"][-1].content
