"""Say why a model call failed in words a user understands; keep the details for the log.

Providers fail in a handful of ways: the key is refused (401/403), the model is unknown
(404), the request is rejected (400, e.g. a prompt over the context window), requests are
rate-limited (429), the server errs (5xx), the connection fails, breaks off mid-reply or
times out, or the server answers 200 with nothing in it. The OpenAI client that
langchain-openai uses already retries what retrying can fix (connection errors, timeouts,
408, 409, 429 and 5xx) ``OPENAI_MAX_RETRIES`` times with exponential backoff, honouring
``Retry-After``; an error that reaches the loop is final. A 500 that survived the retries
is the server failing on this very request (llama.cpp answers 500 to a message shape it
cannot template), so it is not reported as a passing outage as 502/503/504 are. The
classes are recognised by ``status_code`` and class name, so this module needs no
provider SDK.
"""

from __future__ import annotations

from agents.sentences import clause


class EmptyReply(ValueError):
    """The server answered (HTTP 200) with a stream that held no chunk at all.

    llama.cpp's server does this when the prompt is larger than its context (the error is
    only in its own log); LangChain reports it as "No generation chunks were returned".
    Raised by :class:`agents.providers.compatible.CompatibleChatOpenAI`.
    """


class ErrorEvent(RuntimeError):
    """A streamed event that is an error object, not a chunk, in a shape the OpenAI SDK
    does not recognise as one: vLLM's ``{"object": "error", "message": ..., "code": 400}``
    (the SDK only knows ``{"error": ...}``). Its message is the server's.

    Raised by :class:`agents.providers.compatible.CompatibleChatOpenAI`; without it the
    event is skipped as a chunk with no choices and the run fails as a dropped connection.
    """


class IncompleteReply(ConnectionError):
    """The stream ended before the reply said it was finished (no ``finish_reason``).

    The connection closed mid-reply (a server that crashed or was stopped, a proxy that
    cut it), so what arrived is a fragment, not an answer.
    """


RATE_LIMITED = (
    "The model provider is limiting requests (HTTP 429) and still was after retries. "
    "Wait a minute and ask again."
)
AUTH_REFUSED = (
    "The model provider refused the credentials (HTTP {status}). An administrator needs "
    "to check the API key (OPENAI_API_KEY)."
)
NOT_FOUND = (
    "The model provider does not know this model or address (HTTP 404). An administrator "
    "needs to check OPENAI_MODEL and OPENAI_BASE_URL."
)
REJECTED = "The model provider rejected the request (HTTP {status}): {detail}"
SERVER_ERROR = (
    "The model provider had a server error (HTTP {status}) and still did after retries. "
    "Try again later."
)
SERVER_FAILED_REQUEST = (
    "The model server could not handle this request (HTTP {status}), and failed the same "
    "way when it was retried, so asking the same again will likely fail too: {detail}. "
    "An administrator can find the cause in the model server's log."
)
EMPTY_REPLY = (
    "The model server sent no reply (an empty response). This usually means the prompt "
    "is larger than the model's context window on the server; an administrator can "
    "raise the server's context size or check its log. A new chat sends a shorter prompt."
)
DROPPED = (
    "The connection to the model provider broke off before the reply was complete. "
    "Try again; if it keeps happening, an administrator can check the model server."
)
STREAM_ERROR = "The model server reported an error while it was replying: {detail}"
UNREACHABLE = "The model provider could not be reached (a connection error). Try again later."
PROVIDER_TIMEOUT = "The model provider did not answer in time, even after retries."
OTHER = "The model call failed ({kind}). The details are in the run's log for an administrator."

# httpx's errors for a connection that broke off while the body was being read.
_DROPPED_NAMES = {"IncompleteReply", "RemoteProtocolError", "ReadError"}
# What langchain-core raises when a stream held no chunk (chat_models.py).
_NO_CHUNKS = "No generation chunks were returned"

_DETAIL_CHARS = 300


def _detail(exc: BaseException) -> str:
    """Return the provider's own message, from its JSON body when there is one."""
    body = getattr(exc, "body", None)
    if isinstance(body, str) and body.strip():
        # ``{"error": "model overloaded"}`` in a stream: the SDK's message is then only
        # "An error occurred during streaming", the server's words are the body.
        return body.strip()[:_DETAIL_CHARS]
    if isinstance(body, dict):
        error = body.get("error", body)
        message = error.get("message") if isinstance(error, dict) else None
        if isinstance(message, str) and message:
            return message[:_DETAIL_CHARS]
        # A pydantic server's {"detail": [{"loc", "msg"}]} (FastAPI, vLLM), also as
        # Mistral's message object: "body.messages.1.content: Field required".
        detail = (message if isinstance(message, dict) else body).get("detail")
        if isinstance(detail, list) and detail:
            return "; ".join(_located(item) for item in detail)[:_DETAIL_CHARS]
    return (getattr(exc, "message", None) or str(exc))[:_DETAIL_CHARS]


def _located(item: object) -> str:
    """Return one pydantic error as ``loc: msg``."""
    if not isinstance(item, dict):
        return str(item)
    loc = ".".join(str(part) for part in item.get("loc") or [])
    return f"{loc}: {item.get('msg', '')}" if loc else str(item.get("msg", item))


def _chain_names(exc: BaseException, depth: int = 8) -> set[str]:
    """Return the class names of ``exc`` and of the exceptions it was raised from.

    The OpenAI SDK wraps httpx's error (``RemoteProtocolError: peer closed connection``)
    in ``APIConnectionError``, and langchain-openai wraps that again.
    """
    found: set[str] = set()
    current: BaseException | None = exc
    while current is not None and depth:
        found |= {cls.__name__ for cls in type(current).__mro__}
        current = current.__cause__ or current.__context__
        depth -= 1
    return found


def describe_model_error(exc: BaseException) -> str:
    """Return a one-line explanation of ``exc`` for the user (no stack, no raw payload).

    Status errors are classed by ``exc.status_code``; connection errors and time-outs by
    the class names ``APITimeoutError`` / ``*Timeout*``, ``APIConnectionError`` /
    ``ConnectError`` and (broken off mid-reply) ``RemoteProtocolError`` / ``ReadError`` /
    :class:`IncompleteReply`; an empty stream by :class:`EmptyReply` or langchain-core's
    ``ValueError("No generation chunks were returned")``; an error event in a stream by
    the SDK's bare ``APIError``. Anything else names only the exception class.
    """
    names = {cls.__name__ for cls in type(exc).__mro__}
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        if status == 429:
            return RATE_LIMITED
        if status in (401, 403):
            return AUTH_REFUSED.format(status=status)
        if status == 404:
            return NOT_FOUND
        if status == 500:
            return SERVER_FAILED_REQUEST.format(status=status, detail=clause(_detail(exc)))
        if status > 500:
            return SERVER_ERROR.format(status=status)
        if 400 <= status < 500:
            return REJECTED.format(status=status, detail=_detail(exc))
    if isinstance(exc, EmptyReply) or (type(exc) is ValueError and str(exc) == _NO_CHUNKS):
        return EMPTY_REPLY
    if "APITimeoutError" in names or any("Timeout" in name for name in names):
        return PROVIDER_TIMEOUT
    if _chain_names(exc) & _DROPPED_NAMES:
        return DROPPED
    if names & {"APIConnectionError", "ConnectError", "ConnectionError"}:
        return UNREACHABLE
    if isinstance(exc, ErrorEvent):
        return STREAM_ERROR.format(detail=str(exc)[:_DETAIL_CHARS])
    if "APIError" in names:
        # An error event inside a 200 stream (llama.cpp's server sends its errors so).
        return STREAM_ERROR.format(detail=_detail(exc))
    return OTHER.format(kind=type(exc).__name__)
