"""The official `openai` client against the engine: a streamed chat turn and a responses
continuation, as a user's application would make them."""

import hashlib


def client_turn(a):
    try:
        from openai import OpenAI
    except ImportError:
        return {"client": None, "unavailable": "the openai package is not importable on the lane host"}
    import openai
    client = OpenAI(base_url=a["base"] + "/v1", api_key=a["key"], max_retries=0, timeout=a.get("timeout", 600))
    text, chunks, finish = "", 0, None
    with client.chat.completions.create(model=a["model"], messages=[{"role": "user", "content": "Name three colours."}],
                                        max_tokens=a["tokens"], temperature=0, stream=True) as stream:
        for chunk in stream:
            if chunk.choices:
                chunks += 1
                text += chunk.choices[0].delta.content or ""
                finish = chunk.choices[0].finish_reason or finish
    first = client.responses.create(model=a["model"], input="Remember the word lantern. Reply with OK.",
                                    max_output_tokens=a["tokens"], temperature=0)
    second = client.responses.create(model=a["model"], input="Which word did I ask you to remember?",
                                     previous_response_id=first.id, max_output_tokens=a["tokens"], temperature=0)
    return {"client": f"openai {openai.__version__}", "chat_chunks": chunks, "chat_finish_reason": finish,
            "chat_text_sha256": hashlib.sha256(text.encode()).hexdigest(), "chat_text_nonempty": bool(text),
            "first_status": first.status, "second_status": second.status,
            "second_previous_id_matches": second.previous_response_id == first.id,
            "second_input_tokens": second.usage.input_tokens,
            "first_total_tokens": first.usage.input_tokens + first.usage.output_tokens,
            "second_text_nonempty": bool(second.output_text)}
