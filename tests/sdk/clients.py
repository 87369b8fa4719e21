"""The official Anthropic and OpenAI Python SDKs as weir's clients.

Run by tests/llm_sdk.rs: `python clients.py SCENARIO` with WEIR_URL (the
listener's base URL), MODEL, API_KEY and MAX_RETRIES in the environment.
Each scenario calls the SDK the way Claude Code or Codex would and prints
one JSON object of what the SDK returned or raised; the Rust test asserts
on it. Nothing here decides pass or fail.
"""

import json
import os
import sys

import anthropic
import openai

URL = os.environ["WEIR_URL"]
MODEL = os.environ.get("MODEL", "m")
KEY = os.environ.get("API_KEY", "sk-test")
RETRIES = int(os.environ.get("MAX_RETRIES", "0"))


def claude(**kw):
    return anthropic.Anthropic(base_url=URL, api_key=KEY, max_retries=RETRIES, timeout=20, **kw)


def codex():
    return openai.OpenAI(base_url=URL + "/v1", api_key=KEY, max_retries=RETRIES, timeout=20)


def error_facts(e):
    facts = {"raised": type(e).__name__}
    status = getattr(e, "status_code", None)
    if status is not None:
        facts["status"] = status
    body = getattr(e, "body", None)
    if body is not None:
        facts["body"] = body
    response = getattr(e, "response", None)
    if response is not None:
        facts["headers"] = {k.lower(): v for k, v in response.headers.items()}
    return facts


MESSAGES = [{"role": "user", "content": "hi"}]


def anthropic_create():
    m = claude().messages.create(model=MODEL, max_tokens=64, messages=MESSAGES)
    return {"text": "".join(b.text for b in m.content if b.type == "text"),
            "stop_reason": m.stop_reason, "input_tokens": m.usage.input_tokens}


def anthropic_stream():
    events = []
    text = []
    with claude().messages.stream(model=MODEL, max_tokens=64, messages=MESSAGES) as s:
        for event in s:
            events.append(event.type)
            if event.type == "text":
                text.append(event.text)
        final = s.get_final_message()
    return {"text": "".join(text), "events": events, "stop_reason": final.stop_reason,
            "output_tokens": final.usage.output_tokens}


def anthropic_stream_partial():
    """Stream and keep what arrived before an error."""
    text = []
    try:
        with claude().messages.stream(model=MODEL, max_tokens=64, messages=MESSAGES) as s:
            for chunk in s.text_stream:
                text.append(chunk)
        return {"text": "".join(text), "raised": None}
    except Exception as e:  # noqa: BLE001 - the test asserts on the type
        facts = error_facts(e)
        facts["text"] = "".join(text)
        return facts


def anthropic_count_tokens():
    r = claude().messages.count_tokens(model=MODEL, messages=MESSAGES)
    return {"input_tokens": r.input_tokens}


def anthropic_auth_token():
    """Claude Code with ANTHROPIC_AUTH_TOKEN: the key travels as a Bearer token."""
    c = anthropic.Anthropic(base_url=URL, auth_token=KEY, api_key=None,
                            max_retries=RETRIES, timeout=20)
    m = c.messages.create(model=MODEL, max_tokens=64, messages=MESSAGES)
    return {"text": "".join(b.text for b in m.content if b.type == "text")}


def openai_responses():
    r = codex().responses.create(model=MODEL, input="hi")
    return {"text": r.output_text, "status": r.status}


def openai_responses_stream():
    events = []
    text = []
    for event in codex().responses.create(model=MODEL, input="hi", stream=True):
        events.append(event.type)
        if event.type == "response.output_text.delta":
            text.append(event.delta)
    return {"text": "".join(text), "events": events}


def openai_chat():
    r = codex().chat.completions.create(model=MODEL, messages=MESSAGES)
    return {"text": r.choices[0].message.content}


def openai_chat_stream_partial():
    text = []
    try:
        for chunk in codex().chat.completions.create(model=MODEL, messages=MESSAGES, stream=True):
            if chunk.choices and chunk.choices[0].delta.content:
                text.append(chunk.choices[0].delta.content)
        return {"text": "".join(text), "raised": None}
    except Exception as e:  # noqa: BLE001
        facts = error_facts(e)
        facts["text"] = "".join(text)
        return facts


READ_FILE = {"name": "read_file", "description": "Read a file",
             "input_schema": {"type": "object", "properties": {"path": {"type": "string"}},
                              "required": ["path"]}}


def anthropic_tool_round_trip():
    """Claude Code's loop: the model calls a tool, the result goes back,
    the model answers; both turns through the SDK's streaming helper."""
    c = claude()
    messages = [{"role": "user", "content": "What is in notes.txt?"}]
    with c.messages.stream(model=MODEL, max_tokens=256, messages=messages,
                           tools=[READ_FILE], system="You are an agent.") as s:
        first = s.get_final_message()
    calls = [b for b in first.content if b.type == "tool_use"]
    messages.append({"role": "assistant", "content": [b.model_dump() for b in first.content]})
    messages.append({"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": calls[0].id,
         "content": [{"type": "text", "text": "hello from notes"}]}]})
    with c.messages.stream(model=MODEL, max_tokens=256, messages=messages,
                           tools=[READ_FILE]) as s:
        second = s.get_final_message()
    return {"stop_reason": first.stop_reason,
            "tool": calls[0].name, "input": calls[0].input,
            "answer": "".join(b.text for b in second.content if b.type == "text"),
            "final_stop_reason": second.stop_reason}


def openai_tool_round_trip():
    """Codex's loop over the Responses API: a function call, its output
    back, the answer; both turns streamed."""
    c = codex()
    tools = [{"type": "function", "name": "read_file", "description": "Read a file",
              "parameters": READ_FILE["input_schema"]}]
    items = [{"type": "message", "role": "user",
              "content": [{"type": "input_text", "text": "What is in notes.txt?"}]}]
    with c.responses.stream(model=MODEL, input=items, tools=tools,
                            instructions="You are Codex.") as s:
        types = [e.type for e in s]
        first = s.get_final_response()
    calls = [o for o in first.output if o.type == "function_call"]
    items.append({"type": "function_call", "call_id": calls[0].call_id,
                  "name": calls[0].name, "arguments": calls[0].arguments})
    items.append({"type": "function_call_output", "call_id": calls[0].call_id,
                  "output": "hello from notes"})
    with c.responses.stream(model=MODEL, input=items, tools=tools) as s:
        for _ in s:
            pass
        second = s.get_final_response()
    return {"first_status": first.status, "events": types,
            "tool": calls[0].name, "arguments": json.loads(calls[0].arguments),
            "answer": second.output_text, "status": second.status}


def openai_chat_tool_round_trip():
    """A Chat Completions agent's loop (Cursor, Cline, aider...): the model
    calls a tool, the result goes back as a `tool` message, the model
    answers; once whole with `create`, once streamed with the SDK's
    streaming helper, which assembles the chunks itself."""
    c = codex()
    tools = [{"type": "function", "function": {"name": "read_file", "description": "Read a file",
                                               "parameters": READ_FILE["input_schema"]}}]
    out = {}
    for mode in ["whole", "stream"]:
        messages = [{"role": "system", "content": "You are an agent."},
                    {"role": "user", "content": "What is in notes.txt?"}]
        if mode == "whole":
            first = c.chat.completions.create(model=MODEL, messages=messages, tools=tools)
        else:
            with c.chat.completions.stream(model=MODEL, messages=messages, tools=tools,
                                           stream_options={"include_usage": True}) as s:
                for _ in s:
                    pass
                first = s.get_final_completion()
        call = first.choices[0].message.tool_calls[0]
        messages.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": call.id, "type": "function",
             "function": {"name": call.function.name, "arguments": call.function.arguments}}]})
        messages.append({"role": "tool", "tool_call_id": call.id, "content": "hello from notes"})
        if mode == "whole":
            second = c.chat.completions.create(model=MODEL, messages=messages, tools=tools)
        else:
            with c.chat.completions.stream(model=MODEL, messages=messages, tools=tools) as s:
                for _ in s:
                    pass
                second = s.get_final_completion()
        out[mode] = {"finish_reason": first.choices[0].finish_reason,
                     "tool": call.function.name, "arguments": json.loads(call.function.arguments),
                     "prompt_tokens": first.usage.prompt_tokens if first.usage else None,
                     "answer": second.choices[0].message.content,
                     "final_finish_reason": second.choices[0].finish_reason}
    return out


SCENARIOS = {f.__name__: f for f in [
    openai_chat_tool_round_trip,
    anthropic_tool_round_trip, openai_tool_round_trip,
    anthropic_create, anthropic_stream, anthropic_stream_partial, anthropic_count_tokens,
    anthropic_auth_token, openai_responses, openai_responses_stream, openai_chat,
    openai_chat_stream_partial,
]}

if __name__ == "__main__":
    try:
        result = SCENARIOS[sys.argv[1]]()
    except Exception as e:  # noqa: BLE001
        result = error_facts(e)
    print(json.dumps(result))
