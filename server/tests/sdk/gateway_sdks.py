"""The official OpenAI or Anthropic Python SDK against a real Recourse gateway.

Run by server/tests/gateway_sdks.rs, which serves Recourse on a loopback port in front of the fake
provider and checks the routes and the provider's log afterwards:

    python gateway_sdks.py openai|anthropic BASE_URL TOKEN

Profiles (by name): `fast` (its first endpoint is overloaded, the second answers "green"),
`streaming` (the same, streamed), `limited` (a quota whose reset is ten minutes away) and `broken` (a
stream that breaks after its first content). The SDKs run with `max_retries=0`: whatever
recovery happens is Recourse's. Prints one JSON line with the route ids; exits non-zero on the
first thing that is not as expected.
"""

import json
import sys

STYLE, BASE, TOKEN = sys.argv[1], sys.argv[2], sys.argv[3]
BAD_TOKEN = "rct_" + "x" * 43
QUESTION = [{"role": "user", "content": "Is the build green?"}]
routes = {}


def check(cond, what):
    if not cond:
        raise SystemExit(f"{STYLE}: {what}")


def expect(error_type, call, what):
    try:
        call()
    except error_type as e:
        return e
    except Exception as e:  # noqa: BLE001 - the point is to name what came instead
        raise SystemExit(f"{STYLE}: {what}: expected {error_type.__name__}, got {type(e).__name__}: {e}")
    raise SystemExit(f"{STYLE}: {what}: expected {error_type.__name__}, the call succeeded")


def headers_of_route(headers, candidate, attempts):
    check(headers.get("x-recourse-candidate") == candidate, f"candidate header {dict(headers)}")
    check(headers.get("x-recourse-attempts") == attempts, f"attempts header {dict(headers)}")
    return headers["x-recourse-route-id"]


if STYLE == "openai":
    import openai

    client = openai.OpenAI(base_url=BASE + "/v1", api_key=TOKEN, max_retries=0)

    raw = client.chat.completions.with_raw_response.create(model="fast", messages=QUESTION)
    routes["json"] = headers_of_route(raw.headers, "backup", "2")
    check(raw.parse().choices[0].message.content == "green", "the JSON answer")

    stream = client.chat.completions.create(model="streaming", messages=QUESTION, stream=True)
    text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
    routes["stream"] = headers_of_route(stream.response.headers, "backup2", "2")
    check(text == "green", f"the streamed answer {text!r}")

    e = expect(
        openai.RateLimitError,
        lambda: client.chat.completions.create(
            model="limited", messages=QUESTION, extra_headers={"x-recourse-max-wait": "1"}
        ),
        "a quota beyond x-recourse-max-wait",
    )
    check(e.response.headers.get("retry-after") == "600", f"retry-after {dict(e.response.headers)}")
    routes["limited"] = e.response.headers["x-recourse-route-id"]

    bad = openai.OpenAI(base_url=BASE + "/v1", api_key=BAD_TOKEN, max_retries=0)
    expect(openai.AuthenticationError, lambda: bad.chat.completions.create(model="fast", messages=QUESTION), "an invalid token")
    expect(openai.NotFoundError, lambda: client.chat.completions.create(model="nope", messages=QUESTION), "an unknown model")

    stream = client.chat.completions.create(model="broken", messages=QUESTION, stream=True)
    got = []

    def read_broken():
        for c in stream:
            if c.choices:
                got.append(c.choices[0].delta.content or "")

    expect(openai.APIError, read_broken, "a stream that breaks after its first chunk")
    check("".join(got) == "gr", f"the content before the break {got!r}")
    routes["broken"] = stream.response.headers["x-recourse-route-id"]
else:
    import anthropic

    client = anthropic.Anthropic(base_url=BASE, api_key=TOKEN, max_retries=0)

    raw = client.messages.with_raw_response.create(model="fast", max_tokens=64, messages=QUESTION)
    routes["json"] = headers_of_route(raw.headers, "backup", "2")
    check(raw.parse().content[0].text == "green", "the JSON answer")

    stream = client.messages.create(model="streaming", max_tokens=64, messages=QUESTION, stream=True)
    text = "".join(e.delta.text for e in stream if e.type == "content_block_delta")
    routes["stream"] = headers_of_route(stream.response.headers, "backup2", "2")
    check(text == "green", f"the streamed answer {text!r}")

    e = expect(
        anthropic.RateLimitError,
        lambda: client.messages.create(
            model="limited", max_tokens=64, messages=QUESTION, extra_headers={"x-recourse-max-wait": "1"}
        ),
        "a rate limit beyond x-recourse-max-wait",
    )
    check(e.response.headers.get("retry-after") == "600", f"retry-after {dict(e.response.headers)}")
    routes["limited"] = e.response.headers["x-recourse-route-id"]

    bad = anthropic.Anthropic(base_url=BASE, api_key=BAD_TOKEN, max_retries=0)
    expect(
        anthropic.AuthenticationError,
        lambda: bad.messages.create(model="fast", max_tokens=64, messages=QUESTION),
        "an invalid token",
    )
    expect(
        anthropic.NotFoundError,
        lambda: client.messages.create(model="nope", max_tokens=64, messages=QUESTION),
        "an unknown model",
    )

    stream = client.messages.create(model="broken", max_tokens=64, messages=QUESTION, stream=True)
    got = []

    def read_broken():
        for e in stream:
            if e.type == "content_block_delta":
                got.append(e.delta.text)

    expect(anthropic.APIStatusError, read_broken, "a stream that breaks after its first chunk")
    check("".join(got) == "Hel", f"the content before the break {got!r}")
    routes["broken"] = stream.response.headers["x-recourse-route-id"]

print(json.dumps(routes))
