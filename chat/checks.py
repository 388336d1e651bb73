"""System checks of the agent's configuration and of a deployment, run at start-up.

``chat.E001``/``E002``: a model that cannot be built; ``E003``/``E004``/``E005``: an
agent whose tools, models or strategies are not there (:func:`check_agents`).
``chat.W001``: a database several processes can share with a channel layer that each
process keeps to itself.

``manage.py`` runs them before ``migrate``, ``ask`` and the other commands; Daphne runs
no checks, so ``project/asgi.py`` calls :func:`require_agent_checks` before serving; the
test suite runs every check when its session starts (``tests/conftest.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from channels.layers import InMemoryChannelLayer
from django.apps import AppConfig
from django.conf import settings
from django.core import checks
from django.core.exceptions import ImproperlyConfigured
from django.db.utils import load_backend
from django.utils.module_loading import import_string

from agents.configured_models import ConfiguredModel
from agents.providers import (
    MissingSettings,
    UnknownProvider,
    check_config,
    find_provider,
    providers,
)
from agents.strategies import STRATEGIES
from agents.tool_loading import ToolLoadError, load_tools
from chat.agents import agents_file
from chat.catalog import configured_models

TAG = "agents"
DEPLOYMENT_TAG = "deployment"
UNKNOWN_PROVIDER_ID = "chat.E001"
MISSING_SETTINGS_ID = "chat.E002"
LOCAL_LAYER_ID = "chat.W001"
BAD_TOOL_ID = "chat.E003"
NOT_CONFIGURED_ID = "chat.E004"
UNKNOWN_POLICY_ID = "chat.E005"
RUN_WORKERS_LAYER_ID = "chat.E006"
TOOLS_HINT = (
    "Name a LangChain tool, a typed function with a docstring, a list of them or a module "
    "with TOOLS, importable by the app: from the project directory, or a directory on "
    "PYTHONPATH (docs/agents.md, 'Tools from code')."
)
MODELS_HINT = "Name a model of AGENT_MODELS_FILE, default or demo (docs/models.md)."

LOCAL_LAYER = (
    "The database ({engine}) can be shared by several server processes, but the channel "
    "layer is in-memory ({backend}): each process would deliver only its own runs' events, "
    "and a tab connected to another process would see nothing of them until reloaded."
)
LOCAL_LAYER_HINT = (
    "Set REDIS_URL (e.g. redis://127.0.0.1:6379/0) so every process shares the channel "
    "layer, or run a single process (docs/deploy.md)."
)

RUN_WORKERS_LAYER = (
    "CHAT_RUN_WORKERS is on, but the channel layer is in-memory ({backend}): the run "
    "owners' processes (manage.py runowner) would never hear of a run, and no run would start."
)
RUN_WORKERS_LAYER_HINT = (
    "Set REDIS_URL so the processes share the channel layer, or turn CHAT_RUN_WORKERS off "
    "(docs/deploy.md, 'Runs in processes of their own')."
)


# Per failure: its id and what to do about it, for the primary model and for a model of
# AGENT_MODELS_FILE.
_HELP: dict[type[ValueError], tuple[str, str, str]] = {
    UnknownProvider: (
        UNKNOWN_PROVIDER_ID,
        "Unset, AGENT_PROVIDER is openai when OPENAI_API_KEY is set, else demo "
        "(docs/configuration.md).",
        "Set that [[models]] table's provider to one of the names listed (docs/models.md).",
    ),
    MissingSettings: (
        MISSING_SETTINGS_ID,
        "Set what it names in the environment, or choose another AGENT_PROVIDER "
        "(docs/configuration.md).",
        "Set what it names (an environment variable, or a field of that [[models]] "
        "table), or remove the model from the file (docs/models.md).",
    ),
}
UNKNOWN_IN_FILE = (
    "Model {key!r} ({source}) has an unknown provider {name!r}; choose one of: {choices}."
)
MISSING_IN_FILE = (
    "Model {key!r} ({source}): the {name} provider ({label}) needs {settings}, which "
    "{verb} not set."
)


def _problem(model: ConfiguredModel) -> tuple[type[ValueError], str] | None:
    """Return what is wrong with a configured model (its exception class and message)."""
    if model.is_primary:
        try:
            check_config(model.config)
        except (UnknownProvider, MissingSettings) as exc:
            return type(exc), str(exc)
        return None
    entry = find_provider(model.config.provider)
    if entry is None:
        choices = ", ".join(f"{e.name} ({e.label})" for e in providers().values())
        message = UNKNOWN_IN_FILE.format(
            key=model.key, source=model.source, name=model.config.provider, choices=choices
        )
        return UnknownProvider, message
    missing = model.missing_settings(entry)
    if missing:
        message = MISSING_IN_FILE.format(
            key=model.key, source=model.source, name=entry.name, label=entry.label,
            settings=" and ".join(missing), verb="is" if len(missing) == 1 else "are",
        )  # fmt: skip
        return MissingSettings, message
    return None


def check_agent_model(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Return an error per configured model whose provider is unknown or lacks settings.

    The primary model (``AGENT_PROVIDER``) is checked as :func:`agents.providers.check_config`
    does; a model of ``AGENT_MODELS_FILE`` is named by its key and table, its settings by
    the names the file gives them (``api_key_env``'s variable).
    """
    errors: list[checks.CheckMessage] = []
    for model in configured_models():
        problem = _problem(model)
        if problem is None:
            continue
        kind, message = problem
        check_id, primary_hint, file_hint = _HELP[kind]
        hint = primary_hint if model.is_primary else file_hint
        errors.append(checks.Error(message, hint=hint, id=check_id))
    return errors


def check_agents(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Return an error per fault of ``AGENTS_FILE`` that only code can see, naming the
    agent and the field: a tool path that does not import or names no usable tool
    (``chat.E003``), a model or strategy that is not configured (``chat.E004``), a tool
    policy for a tool the agent does not have (``chat.E005``: a misspelt name would leave
    the tool it meant unguarded; a name with one of its MCP servers' prefixes passes, as
    their tools are known only once a run lists them). An MCP server that is down is
    not an error: the app serves, and its agents' runs say which is unavailable.
    """
    messages: list[checks.CheckMessage] = []
    model_keys = {model.key for model in configured_models()}
    for agent in agents_file().agents:
        try:
            names = {tool.name for tool in load_tools(agent.tools)}
        except ToolLoadError as exc:
            messages.append(checks.Error(f"Agent {agent.name!r} ({agent.source}): tools: {exc}",
                                         hint=TOOLS_HINT, id=BAD_TOOL_ID))  # fmt: skip
            names = set()
        for key in (*agent.models, agent.default_model):
            if key and key not in model_keys:
                messages.append(checks.Error(
                    f"Agent {agent.name!r} ({agent.source}): models names {key!r}, which is "
                    f"not a configured model (configured: {', '.join(sorted(model_keys))}).",
                    hint=MODELS_HINT, id=NOT_CONFIGURED_ID,
                ))  # fmt: skip
        for strategy in (*agent.strategies, agent.default_strategy):
            if strategy and strategy not in STRATEGIES:
                messages.append(checks.Error(
                    f"Agent {agent.name!r} ({agent.source}): strategies names {strategy!r}; "
                    f"a strategy is one of {', '.join(STRATEGIES)}.",
                    id=NOT_CONFIGURED_ID,
                ))  # fmt: skip
        prefixes = tuple(f"{server}_" for server in agent.mcp_servers)
        for tool in sorted(set(agent.tool_policies) - names):
            if tool.startswith(prefixes) or (not names and agent.tools):
                continue  # an MCP server's tool (known once a run lists it), or tools unread
            servers = f" nor a tool of its MCP servers ({', '.join(prefixes)}…)" if prefixes else ""
            messages.append(checks.Error(
                f"Agent {agent.name!r} ({agent.source}): tool_policies names {tool!r}, which "
                f"is not one of its tools ({', '.join(sorted(names)) or 'none'}){servers}.",
                hint="A misspelt name leaves the tool it meant under its default policy: "
                     "fix the name.",
                id=UNKNOWN_POLICY_ID,
            ))  # fmt: skip
    return messages


@checks.register(DEPLOYMENT_TAG)
def check_shared_channel_layer(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Return a warning when the database is shared but the channel layer is per process.

    Any database but SQLite (PostgreSQL, say) is taken for shared: several Daphne
    processes on it each see every conversation, yet with an in-memory layer (Channels'
    or a subclass of it, such as :class:`chat.layers.InMemoryChannelLayer`, the one
    ``project/settings.py`` names) a group exists only in the process that holds it, so a
    run's fragments reach the tabs of its own process only, silently. Both are judged by
    the classes the settings name, not by their dotted paths. ``chat.W001``; the hint
    names ``REDIS_URL``. A warning, not an error: one process on PostgreSQL is a valid
    set-up. Registered when this module is imported (``chat.apps`` imports it in ``ready``).
    """
    engine = settings.DATABASES.get("default", {}).get("ENGINE", "")
    backend = getattr(settings, "CHANNEL_LAYERS", {}).get("default", {}).get("BACKEND", "")
    if _is_sqlite(engine) or not _is_in_memory(backend):
        return []
    message = LOCAL_LAYER.format(engine=engine, backend=backend)
    return [checks.Warning(message, hint=LOCAL_LAYER_HINT, id=LOCAL_LAYER_ID)]


def check_run_workers_layer(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[checks.CheckMessage]:
    """Return an error when ``CHAT_RUN_WORKERS`` is on with an in-memory channel layer.

    The web process sends each run's start to the run owners' processes through the
    layer; one that lives in a process reaches none of them. ``chat.E006``, with the
    agent checks (``TAG``), so Daphne refuses to serve (:func:`require_agent_checks`) and
    ``runowner`` to start.
    """
    backend = getattr(settings, "CHANNEL_LAYERS", {}).get("default", {}).get("BACKEND", "")
    if not settings.CHAT_RUN_WORKERS or not _is_in_memory(backend):
        return []
    return [checks.Error(RUN_WORKERS_LAYER.format(backend=backend),
                         hint=RUN_WORKERS_LAYER_HINT, id=RUN_WORKERS_LAYER_ID)]  # fmt: skip


def _is_sqlite(engine: str) -> bool:
    """Return True when the database backend ``engine`` names is SQLite (or built on it)."""
    try:
        return load_backend(engine).DatabaseWrapper.vendor == "sqlite"
    except (
        ImportError,
        ImproperlyConfigured,
    ):  # its driver is not installed here: taken for shared
        return False


def _is_in_memory(backend: str) -> bool:
    """Return True when the channel layer class ``backend`` names keeps its groups in the
    process: Channels' ``InMemoryChannelLayer`` or a subclass of it."""
    try:
        layer = import_string(backend)
    except ImportError:  # Channels itself reports a layer that does not import
        return False
    return isinstance(layer, type) and issubclass(layer, InMemoryChannelLayer)


def require_agent_checks() -> None:
    """Raise ``ImproperlyConfigured`` listing the agent check errors, if there are any.

    For entry points that run no checks of their own (Daphne serving project/asgi.py).
    """
    errors = [
        message
        for message in checks.run_checks(tags=[TAG])
        if message.is_serious() and not message.is_silenced()
    ]
    if errors:
        listed = "\n".join(str(message) for message in errors)
        raise ImproperlyConfigured(f"The agent is not configured; not serving.\n{listed}")
