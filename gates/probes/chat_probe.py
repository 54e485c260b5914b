"""Runs on the lane host: asks a served engine questions over its OpenAI-compatible HTTP API and
prints one JSON line of facts. Stdlib only, so it runs with any interpreter on the host.

usage: chat_probe.py BASE_URL API_KEY_FILE MODEL wait|capital|retrieval [SEED]"""

import json
import random
import sys
import time
import urllib.error
import urllib.request


def _call(base, key, path, body=None, timeout=600):
    req = urllib.request.Request(base + path, data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


MODEL = "default"


def _chat(base, key, text, max_tokens):
    body = {"model": MODEL, "messages": [{"role": "user", "content": text}], "temperature": 0,
            "max_tokens": max_tokens}
    out = _call(base, key, "/v1/chat/completions", body)
    return out["choices"][0]["message"]["content"], out["usage"]


def wait(base, key, timeout_s=600):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(base + "/health", timeout=5) as resp:
                if json.loads(resp.read()).get("status") == "ok":
                    return {"ready": True}
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(1)
    return {"ready": False}


def capital(base, key):
    answer, usage = _chat(base, key, "What is the capital of France?", 32)
    return {"contains_expected": "Paris" in answer, "completion_tokens": usage["completion_tokens"]}


FILLER = ("The quarterly report lists routine maintenance of the cooling loops, the rotation of "
          "night shifts, and the inventory of spare parts kept in the east storage room. ")


def retrieval(base, key, seed=7):
    rng = random.Random(seed)
    trials, exact = [], 0
    for position in (0.1, 0.5, 0.9):
        code = f"{rng.randrange(10**6):06d}"
        blocks = [FILLER] * 40
        blocks.insert(int(len(blocks) * position), f"Remember this: KEY={code}. ")
        prompt = "".join(blocks) + "\nWhat is the value of KEY? Answer with the six digits only."
        answer, usage = _chat(base, key, prompt, 16)
        hit = code in answer
        exact += hit
        trials.append({"position": position, "exact": hit, "prompt_tokens": usage["prompt_tokens"]})
    return {"trials": trials, "exact": exact, "total": len(trials)}


def main(argv):
    global MODEL
    base, key_file, MODEL, what = argv[1], argv[2], argv[3], argv[4]
    key = open(key_file).read().strip()
    if what == "wait":
        out = wait(base, key)
    elif what == "capital":
        out = capital(base, key)
    else:
        out = retrieval(base, key, int(argv[5]) if len(argv) > 5 else 7)
    print(json.dumps(out, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
