"""Django settings, read from the environment (see docs/configuration.md).

Defaults suit one laptop: SQLite, the in-memory channel layer, the offline demo model.
Set DATABASE_URL, REDIS_URL and OPENAI_API_KEY for more.
"""

from __future__ import annotations

import sys
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from agents.configured_models import ModelsFileError, load_models_file
from agents.definitions import DefinitionError, load_agents_file
from agents.providers import ModelConfig, find_provider
from agents.stopping import EARLY_STOPPING_METHODS
from agents.strategies import DEFAULT_STRATEGY, STRATEGIES
from chat.traces.detectors import BUILT_IN as REDACTION_DETECTORS
from chat.traces.redaction import redactor_from
from project.env import (
    env_bool,
    env_choice,
    env_content_capture,
    env_decimal,
    env_float,
    env_int,
    env_json_strings,
    env_list,
    env_otel_traces_endpoint,
    env_proxy_ssl_header,
    env_str,
    env_tool_policies,
)

BASE_DIR = Path(__file__).resolve().parent.parent

DEBUG = env_bool("DJANGO_DEBUG", False)
# The default's "django-insecure-" prefix makes `manage.py check --deploy` flag it (W009).
SECRET_KEY = env_str(
    "DJANGO_SECRET_KEY", "django-insecure-dev-key-set-DJANGO_SECRET_KEY-in-production"
)
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

# Behind a TLS proxy (docs/deploy.md, "HTTPS"). Every default leaves plain http alone, so
# `make run` on http://127.0.0.1:8000 works with DEBUG off. Cookies marked Secure are
# sent over https only (the websocket's handshake too: wss is https).
SESSION_COOKIE_SECURE = env_bool("DJANGO_SESSION_COOKIE_SECURE", False)
CSRF_COOKIE_SECURE = env_bool("DJANGO_CSRF_COOKIE_SECURE", False)
# Strict-Transport-Security on https responses (SecurityMiddleware sends it only when
# request.is_secure()); seconds, 0: not sent.
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("DJANGO_SECURE_HSTS_PRELOAD", False)
# The header by which the proxy says the browser used https (X-Forwarded-Proto), for a
# server run without Daphne's --proxy-headers (which sets the scheme from it itself). Set
# it only when the proxy always sets or strips that header: a client could send it.
SECURE_PROXY_SSL_HEADER = env_proxy_ssl_header("DJANGO_SECURE_PROXY_SSL_HEADER")
# Redirect http requests to https; /healthz is left alone, as load balancers probe the
# processes over plain http.
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", False)
SECURE_REDIRECT_EXEMPT = [r"^healthz$"]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "chat",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last: makes the chain above it sync, one thread hop a request (its docstring).
    "project.middleware.SyncMiddlewareChain",
]

ROOT_URLCONF = "project.urls"
ASGI_APPLICATION = "project.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.config(
        env="DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}", conn_max_age=0
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Keep each thread's connection (seconds; 0 closes it after every call): with 0,
    # every database_sync_to_async call opens the file, runs the PRAGMAs and closes it.
    # The cost: a thread that served a page keeps its 3 descriptors (file, WAL, shared
    # memory) until it ends. PostgreSQL keeps 0: its pool reuses connections, and Django
    # refuses a pool with persistent connections.
    DATABASES["default"]["CONN_MAX_AGE"] = env_int("DATABASE_CONN_MAX_AGE", 600, minimum=0)
    DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
    # The server, `manage.py ask` and a second process may write at once: take the write
    # lock when a transaction starts (no failing lock upgrade), wait up to 20 s for it,
    # and let readers go on while someone writes (WAL).
    DATABASES["default"].setdefault("OPTIONS", {}).update(
        {
            "transaction_mode": "IMMEDIATE",
            "timeout": 20,
            "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        }
    )
elif DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Each HTTP request runs its sync view in a thread with a connection of its own, so
    # many page loads at once meet PostgreSQL's "too many clients": a psycopg pool bounds
    # the connections of a process.
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 2,
        "max_size": env_int("DATABASE_POOL_MAX_SIZE", 40, minimum=1),
        "timeout": 60,
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

REDIS_URL = env_str("REDIS_URL")
# Which channels-redis layer carries the groups: "pubsub" (RedisPubSubChannelLayer: Redis
# PUBLISH/SUBSCRIBE, at-most-once; docs/configuration.md says what that means for a tab)
# or "core" (RedisChannelLayer: a queue per process in Redis, drained one message at a
# time, far slower under load; docs/benchmarks.md, "Streaming latency").
REDIS_CHANNEL_LAYER = env_choice("REDIS_CHANNEL_LAYER", "pubsub", ("pubsub", "core"))
# What channels-redis puts before every key and pub/sub channel name ("asgi", its own
# default). Apps (or test workers) sharing one Redis need one each: pub/sub channels are
# global to the server, whatever database REDIS_URL names.
REDIS_PREFIX = env_str("REDIS_PREFIX") or "asgi"
# redis-py's default socket_timeout (5 s) equals channels-redis' blocking read (BRPOP, 5 s),
# so an idle socket's read would time out and kill it. redis-py caps a pool at 100
# connections and the core layer holds one per command in flight: 200 sockets joining at
# once hit the cap.
_REDIS_HOST = {
    "address": REDIS_URL,
    "socket_timeout": 30,
    "max_connections": env_int("REDIS_MAX_CONNECTIONS", 1000, minimum=1),
}
if REDIS_URL and REDIS_CHANNEL_LAYER == "pubsub":
    CHANNEL_LAYERS = {
        # Takes only hosts, prefix, serializer and encryption options: no capacity or
        # expiry (each socket's queue in the process is unbounded; nothing waits in Redis).
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [_REDIS_HOST], "prefix": REDIS_PREFIX},
        }
    }
elif REDIS_URL:
    CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            # The capacity is per process: channels-redis keeps one queue for all the
            # sockets of a process, and a full one drops fragments, saying so at INFO
            # only (counted and warned of through LOGGING's redis_over_capacity filter).
            "CONFIG": {
                "hosts": [_REDIS_HOST],
                "prefix": REDIS_PREFIX,
                "capacity": env_int("REDIS_CHANNEL_CAPACITY", 20_000, minimum=100),
            },
        }
    }
else:
    CHANNEL_LAYERS = {
        # A message older than `expiry` (Channels' default 60 s; 300 here, for a slow,
        # loaded process) is dropped. A socket's queue holds `capacity` messages;
        # chat.layers counts and logs the messages expired or missed by a full queue, and
        # tells the socket, which sends its page what a reload shows (docs/configuration.md).
        # chat.layers sweeps every channel for expired messages at most once a second
        # (Channels' own layer swept them all at every message: quadratic in the sockets).
        "default": {
            "BACKEND": "chat.layers.InMemoryChannelLayer",
            "CONFIG": {"capacity": 1500, "expiry": 300, "clean_interval": 1.0},
        }
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "chat:home"
LOGOUT_REDIRECT_URL = "chat:home"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
# Only for `collectstatic` in a deployment; `make run` serves static/ directly.
STATIC_ROOT = env_str("DJANGO_STATIC_ROOT") or None
# Serve static files straight from STATICFILES_DIRS: no collectstatic step for `make run`.
WHITENOISE_USE_FINDERS = True

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    # channels-redis' core layer says it dropped messages over its capacity only at INFO:
    # chat.layers.RedisOverCapacity counts them with the in-memory layer's and warns on
    # the chat.layers logger instead (docs/deploy.md, "Redis").
    "filters": {"redis_over_capacity": {"()": "chat.layers.RedisOverCapacity"}},
    "loggers": {
        "chat": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
        "channels_redis.core": {"level": "INFO", "filters": ["redis_over_capacity"]},
    },
}

# What every trace export (CSV, JSONL, OTLP files, live telemetry) redacts, stored rows
# untouched (docs/redaction.md): the built-in detectors named, comma-separated (unset or
# blank: all; "none": none), and the operator's regexes, a JSON array of strings. A bad
# name or a pattern that does not compile stops start-up, naming it.
TRACE_REDACT = env_list("TRACE_REDACT", []) or list(REDACTION_DETECTORS)
TRACE_REDACT_PATTERNS = env_json_strings("TRACE_REDACT_PATTERNS")
redactor_from(TRACE_REDACT, TRACE_REDACT_PATTERNS)

# The agent. With OPENAI_API_KEY set, any OpenAI-compatible endpoint; else the offline demo.
# An unknown AGENT_PROVIDER or a provider's missing setting is a system check error
# (chat/checks.py), reported by manage.py and by project/asgi.py before serving.
# The provider's entry (agents/providers/) gives the endpoint and model name when
# OPENAI_BASE_URL and OPENAI_MODEL are blank (openai: api.openai.com and gpt-4o-mini).
OPENAI_API_KEY = env_str("OPENAI_API_KEY")
AGENT_PROVIDER = env_str("AGENT_PROVIDER", "openai" if OPENAI_API_KEY else "demo")
_AGENT_ENTRY = find_provider(AGENT_PROVIDER)  # None: the start-up check names the choices
AGENT_MODEL = ModelConfig(
    provider=AGENT_PROVIDER,
    model=env_str("OPENAI_MODEL", _AGENT_ENTRY.default_model if _AGENT_ENTRY else ""),
    base_url=env_str("OPENAI_BASE_URL"),
    api_key=OPENAI_API_KEY,
    temperature=env_float("OPENAI_TEMPERATURE", 0.0) if env_str("OPENAI_TEMPERATURE") else None,
    timeout_s=env_float("OPENAI_TIMEOUT_S", 60.0, minimum=1.0),
    max_retries=env_int("OPENAI_MAX_RETRIES", 2, minimum=0),
    token_delay_s=env_float("DEMO_TOKEN_DELAY_MS", 15.0, minimum=0.0) / 1000,
    # A cap on one reply's tokens (0: the server's default), so a local model that loses
    # its way ends its reply instead of streaming until AGENT_MODEL_TIMEOUT_S.
    max_tokens=env_int("AGENT_MAX_TOKENS", 0, minimum=0),
    # The model's context window in tokens; 0: the provider entry's (8,192 unless it says).
    context_window=env_int("AGENT_CONTEXT_TOKENS", 0, minimum=0),
)
# More models a conversation can pick (docs/models.md): a TOML file of [[models]] tables,
# relative to the project directory. Each names the environment variable holding its key.
AGENT_MODELS_FILE = env_str("AGENT_MODELS_FILE")
try:
    AGENT_EXTRA_MODELS = (
        load_models_file(BASE_DIR / AGENT_MODELS_FILE, base=AGENT_MODEL)
        if AGENT_MODELS_FILE
        else []
    )
except ModelsFileError as exc:
    raise ImproperlyConfigured(str(exc)) from None
# The agents a chat can pick (docs/agents.md): a TOML file of [[agents]] (the first is the
# default) and the [[mcp_servers]] they use, relative to the project directory. Its shape
# is checked here; whether its tools import, its models exist and its servers answer, by
# the system checks (chat/checks.py).
AGENTS_FILE = env_str("AGENTS_FILE", "agents/bundled/agents.toml")
try:
    AGENT_DEFINITIONS = load_agents_file(
        BASE_DIR / AGENTS_FILE, python=sys.executable, base_dir=BASE_DIR
    )
except DefinitionError as exc:
    raise ImproperlyConfigured(str(exc)) from None
# Offer the offline demo in the picker beside real models (it needs no key or network).
AGENT_OFFER_DEMO = env_bool("AGENT_OFFER_DEMO", True)
# Simulated latency of each bundled (offline) tool call, so running tool cards are visible.
DEMO_TOOL_DELAY_MS = env_float("DEMO_TOOL_DELAY_MS", 400.0, minimum=0.0)
# The strategy of new conversations (each chat can pick its own before its first message).
AGENT_STRATEGY = env_choice("AGENT_STRATEGY", DEFAULT_STRATEGY, STRATEGIES)
AGENT_MAX_ITERATIONS = env_int("AGENT_MAX_ITERATIONS", 15, minimum=1)
AGENT_TOOL_TIMEOUT_S = env_float("AGENT_TOOL_TIMEOUT_S", 30.0, minimum=0.1)
AGENT_MODEL_TIMEOUT_S = env_float("AGENT_MODEL_TIMEOUT_S", 120.0, minimum=1.0)
# LangChain AgentExecutor's max_execution_time: seconds of wall clock a whole run may take
# (0: no limit); without it a run can last AGENT_MAX_ITERATIONS x AGENT_MODEL_TIMEOUT_S.
AGENT_MAX_EXECUTION_TIME_S = env_float("AGENT_MAX_EXECUTION_TIME_S", 0.0, minimum=0.0)
# AgentExecutor's early_stopping_method at AGENT_MAX_ITERATIONS: "force" ends without an
# answer; "generate" asks the model once more, without tools, for one.
AGENT_EARLY_STOPPING_METHOD = env_choice(
    "AGENT_EARLY_STOPPING_METHOD", "force", EARLY_STOPPING_METHODS
)
# People in the loop (docs/configuration.md): each tool's policy, "tool=ask,tool=deny"
# (allow, ask or deny; unnamed tools: allow). Staff may override a tool in the admin.
AGENT_TOOL_POLICIES = env_tool_policies("AGENT_TOOL_POLICIES")
# Seconds a call may wait for a person's approval before it expires as denied (0: never).
AGENT_APPROVAL_TIMEOUT_S = env_float("AGENT_APPROVAL_TIMEOUT_S", 3600.0, minimum=0.0)
# AgentExecutor's trim_intermediate_steps: each model turn's scratchpad shows only the
# run's last N tool steps (a turn's parallel calls kept together); 0: all of them.
AGENT_TRIM_INTERMEDIATE_STEPS = env_int("AGENT_TRIM_INTERMEDIATE_STEPS", 0, minimum=0)
# Budgets per run, checked after each model turn (0: none): tokens in and out together,
# and their cost in the model's price currency (admin: Model prices; no price: no limit).
AGENT_MAX_RUN_TOKENS = env_int("AGENT_MAX_RUN_TOKENS", 0, minimum=0)
AGENT_MAX_RUN_COST = env_decimal("AGENT_MAX_RUN_COST", "0")
AGENT_MAX_OBSERVATION_CHARS = env_int("AGENT_MAX_OBSERVATION_CHARS", 8000, minimum=100)
AGENT_MAX_RESULT_CHARS = env_int("AGENT_MAX_RESULT_CHARS", 1_000_000, minimum=100)
# The chat page shows this much of a tool result; the admin and the CSV have it whole.
CHAT_RESULT_PREVIEW_CHARS = env_int("CHAT_RESULT_PREVIEW_CHARS", 20_000, minimum=100)
# The chat page shows a conversation's newest exchanges (a question and its run each), this
# many; "Show earlier messages" loads as many again. 1,000 messages whole were 6 MiB.
CHAT_PAGE_EXCHANGES = env_int("CHAT_PAGE_EXCHANGES", 20, minimum=1)
# An ended run shows its last this many steps, "Show the N earlier steps" the rest (a run of
# 200 steps whole was 445 KiB). A running run shows all of them.
CHAT_RUN_STEPS_SHOWN = env_int("CHAT_RUN_STEPS_SHOWN", 30, minimum=1)
CHAT_MAX_MESSAGE_CHARS = env_int("CHAT_MAX_MESSAGE_CHARS", 8000, minimum=1)
# Streamed text goes at once and is coalesced while an earlier fragment is still being
# sent (chat.live.GroupPublisher). This is the least time (ms) between two text fragments
# of one element after its first. 10 ms keeps a browser's main thread from swapping a
# fragment per token of a fast model (a 3 ms/token demo made a sidebar menu miss its
# click in tests/browser/test_sidebar.py); a model slower than 10 ms a token waits not at
# all.
CHAT_STREAM_FLUSH_MS = env_float("CHAT_STREAM_FLUSH_MS", 10.0, minimum=0.0)
# Text fragments a second the whole process sends, shared by every reply streaming at
# once (chat.live.StreamLoad): with more replies streaming than that allows at the rate
# above, each waits its share between fragments (at most 250 ms); 0: no budget. At 200
# conversations it sends each page bigger pieces of the same text instead of spending
# the process on a relay per token (docs/benchmarks.md, issue 25).
CHAT_STREAM_FRAMES_PER_S = env_float("CHAT_STREAM_FRAMES_PER_S", 400.0, minimum=0.0)
# New runs one user (or guest browser) may start per minute, across their chats; 0: no limit.
CHAT_RUNS_PER_MINUTE = env_int("CHAT_RUNS_PER_MINUTE", 10, minimum=0)
# Messages a conversation may hold queued while its run goes (docs/queue.md); 0 refuses a
# message sent while a run is going, as before the queue.
CHAT_MAX_QUEUED = env_int("CHAT_MAX_QUEUED", 5, minimum=0)
# A running run's process writes a heartbeat this often; a run whose heartbeat is older
# than AGENT_STALE_AFTER_S is taken for dead (its process crashed) and marked interrupted.
AGENT_HEARTBEAT_S = env_float("AGENT_HEARTBEAT_S", 10.0, minimum=0.05)
AGENT_STALE_AFTER_S = env_float("AGENT_STALE_AFTER_S", 60.0, minimum=1.0)
if AGENT_STALE_AFTER_S < 3 * AGENT_HEARTBEAT_S:
    raise ImproperlyConfigured(
        f"AGENT_STALE_AFTER_S ({AGENT_STALE_AFTER_S:g}) must be at least three times "
        f"AGENT_HEARTBEAT_S ({AGENT_HEARTBEAT_S:g}), or live runs would be taken for dead."
    )
# Runs in processes of their own (`manage.py runowner`,
# docs/deploy.md#runs-in-processes-of-their-own): a web process (Daphne) then serves pages
# and sockets only and sends each run's start, and the queue's next message, to the run
# owners' group on the channel layer; the run owners run them. Needs a channel layer
# shared by the processes (REDIS_URL). Off, each process runs what its own sockets send,
# as `make run` does.
CHAT_RUN_WORKERS = env_bool("CHAT_RUN_WORKERS", False)
# On SIGTERM (a deploy, systemctl stop) or Ctrl-C, a server process stops accepting, lets
# its runs go on for up to AGENT_SHUTDOWN_GRACE_S, then ends the rest as cancelled at once
# (chat/owner.py). Off, its runs stop with it and stay "running" until another
# process's sweep marks them interrupted (about AGENT_STALE_AFTER_S later). The grace is 0
# by default so Ctrl-C and the test servers stop at once; deploy/ sets 20 s.
AGENT_GRACEFUL_SHUTDOWN = env_bool("AGENT_GRACEFUL_SHUTDOWN", True)
AGENT_SHUTDOWN_GRACE_S = env_float("AGENT_SHUTDOWN_GRACE_S", 0.0, minimum=0.0)

# Live OpenTelemetry export (docs/telemetry.md): on when the standard OpenTelemetry
# environment names an OTLP endpoint (OTEL_EXPORTER_OTLP_ENDPOINT or
# OTEL_EXPORTER_OTLP_TRACES_ENDPOINT; headers, timeout, compression and the service name
# are the SDK's to read); OTEL_SDK_DISABLED=true turns it off. Message content (prompts,
# answers, tool arguments and results, reasoning) is sent only with
# OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT or TELEMETRY_CAPTURE_CONTENT true.
TELEMETRY_LIVE = env_otel_traces_endpoint()
TELEMETRY_CAPTURE_CONTENT = env_content_capture(
    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", False
) or env_bool("TELEMETRY_CAPTURE_CONTENT", False)
