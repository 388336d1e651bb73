"""The models a conversation can pick: the primary one and those of ``AGENT_MODELS_FILE``.

The primary model is today's single model (``AGENT_PROVIDER`` and the ``OPENAI_*``
settings), under the key :data:`PRIMARY_KEY`. More models are listed in a TOML file, one
``[[models]]`` table each (docs/models.md); the file names the environment variable that
holds each key (``api_key_env``) and may not hold a key itself, so it can be committed and
shared. The offline demo is offered too (key :data:`DEMO_KEY`) unless it is already the
primary model or ``AGENT_OFFER_DEMO`` is off.

No Django here: ``project/settings.py`` calls :func:`load_models_file` while settings
load, and a file that cannot be read or is malformed raises :class:`ModelsFileError`
naming the file, the table and the field, which the settings turn into
``ImproperlyConfigured``. Whether each model's provider exists and has what it requires
is a system check (``chat/checks.py``), as it is for the primary model. The settings-bound
catalog built from these (the configured models of a server) is :mod:`chat.catalog`.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from urllib.parse import urlsplit

from agents.definitions import DefinitionError, read_toml
from agents.providers import ModelConfig, ProviderEntry

PRIMARY_KEY = "default"
DEMO_KEY = "demo"
KEY_PATTERN = re.compile(r"[a-z0-9][a-z0-9_.-]{0,31}")
ENV_NAME_PATTERN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
LABEL_MAX_CHARS = 80
# Fields of a [[models]] table besides ModelConfig's own (provider, model, base_url...).
OWN_FIELDS = ("key", "label", "api_key_env")
# Never read from the file: the key comes from the environment (api_key_env), and
# token_delay_s only paces the demo, from DEMO_TOKEN_DELAY_MS.
NOT_IN_FILE = ("api_key", "token_delay_s")
# Client options a model of the file takes from the primary model unless it sets them
# (max_tokens, AGENT_MAX_TOKENS, comes with the provider profiles of issue 10's part A).
INHERITED = ("timeout_s", "max_retries", "token_delay_s", "max_tokens")


class ModelsFileError(ValueError):
    """A models file that cannot be used; the message names the file, table and field."""


@dataclass(frozen=True)
class ConfiguredModel:
    """One model a conversation can pick: its ``key``, ``label`` and :class:`ModelConfig`.

    ``key`` is short and stable (stored on the conversation, given to ``ask --model``);
    ``label`` is what the picker shows (blank: the provider entry's description of the
    model, e.g. "deepseek-chat via api.deepseek.com"). ``source`` says where it was
    configured, for error messages; ``setting_names`` maps a config field to the setting
    a person fills it with (``{"api_key": "DEEPSEEK_API_KEY"}``), for fields that differ
    from the entry's own ``requires`` (those name the primary model's settings).
    """

    key: str
    config: ModelConfig
    label: str = ""
    source: str = "AGENT_PROVIDER and the OPENAI_* settings"
    setting_names: Mapping[str, str] = field(default_factory=dict)

    @property
    def is_primary(self) -> bool:
        """Return True for the model of ``AGENT_PROVIDER`` and ``OPENAI_*``."""
        return self.key == PRIMARY_KEY

    def display_label(self, entry: ProviderEntry | None) -> str:
        """Return the label the picker shows: the configured one, or the entry's description.

        ``entry`` is the model's provider (None when it is not registered: the system
        checks report that, and the key is shown).
        """
        if self.label:
            return self.label
        return entry.model_label(self.config) if entry else self.key

    def missing_settings(self, entry: ProviderEntry) -> list[str]:
        """Return the settings this model lacks for ``entry``, named as a person sets them."""
        return [
            self.setting_names.get(req.field, req.setting)
            for req in entry.requires
            if not getattr(self.config, req.field)
        ]


def endpoint_of(config: ModelConfig, entry: ProviderEntry | None) -> str:
    """Return the host[:port] a model is reached at ("" for one that needs no network).

    From ``config.base_url`` (a URL written without a scheme is read as one with), else the
    entry's ``default_endpoint`` or the host of its ``default_base_url`` (the local
    servers' entries name one). Never the user info or the path and query: a base URL may
    carry credentials (``https://user:key@host/v1``) or a key in its query, and this is
    stored on every run and shown on the page.
    """
    base_url = config.base_url
    if not base_url:
        if entry is None or entry.default_endpoint:
            return entry.default_endpoint if entry else ""
        # Entries gain default_base_url with the provider profiles (issue 10, part A).
        base_url = getattr(entry, "default_base_url", "")
        if not base_url:
            return ""
    url = base_url if "://" in base_url else f"//{base_url}"
    try:
        netloc = urlsplit(url).netloc
    except ValueError:  # e.g. an unbalanced "[" in the host
        return ""
    return netloc.rpartition("@")[2][:255]


def configured_models(
    primary: ModelConfig,
    extras: Sequence[ConfiguredModel] = (),
    *,
    offer_demo: bool = True,
) -> list[ConfiguredModel]:
    """Return the models a conversation can pick, primary first, the demo last.

    The demo (key ``demo``) is added when ``offer_demo`` is set and no model already uses
    the ``demo`` provider; it paces its stream like the primary model's config says
    (``token_delay_s``).
    """
    models = [ConfiguredModel(key=PRIMARY_KEY, config=primary), *extras]
    if offer_demo and all(model.config.provider != DEMO_KEY for model in models):
        demo = ModelConfig(provider=DEMO_KEY, token_delay_s=primary.token_delay_s)
        models.append(ConfiguredModel(key=DEMO_KEY, config=demo, source="AGENT_OFFER_DEMO"))
    return models


def _field_kinds() -> dict[str, tuple[type, ...]]:
    """Return the TOML value types each :class:`ModelConfig` field the file may set takes."""
    kinds: dict[str, tuple[type, ...]] = {}
    for config_field in fields(ModelConfig):
        if config_field.name in NOT_IN_FILE:
            continue
        annotation = str(config_field.type)
        if "float" in annotation:
            kinds[config_field.name] = (int, float)
        elif "int" in annotation:
            kinds[config_field.name] = (int,)
        elif "bool" in annotation:
            kinds[config_field.name] = (bool,)
        else:
            kinds[config_field.name] = (str,)
    return kinds


_KIND_WORDS = {(int, float): "a number", (int,): "a whole number", (bool,): "true or false"}


def _model_from_table(
    table: object, where: str, base: ModelConfig, environ: Mapping[str, str]
) -> ConfiguredModel:
    if not isinstance(table, dict):
        raise ModelsFileError(f"{where} must be a table of settings.")
    kinds = _field_kinds()
    for name in table:
        if name == "api_key":
            raise ModelsFileError(
                f"{where} has api_key: keys do not go in this file. Put the key in an "
                "environment variable and name it with api_key_env (docs/models.md)."
            )
        if name not in kinds and name not in OWN_FIELDS:
            allowed = ", ".join([*OWN_FIELDS, *kinds])
            raise ModelsFileError(f"{where} has an unknown field {name!r}; fields: {allowed}.")
    for name in ("key", "provider"):
        if name not in table:
            raise ModelsFileError(f"{where} has no {name} (it is required).")
    for name in (*OWN_FIELDS, *kinds):
        if name not in table:
            continue
        value = table[name]
        allowed_types = kinds.get(name, (str,))
        # TOML booleans are ints to Python: refuse them where a number is meant.
        if not isinstance(value, allowed_types) or (
            isinstance(value, bool) and bool not in allowed_types
        ):
            kind = _KIND_WORDS.get(allowed_types, "a string")
            raise ModelsFileError(f"{where}: {name} must be {kind}, not {value!r}.")
    key = table["key"].strip()
    if not KEY_PATTERN.fullmatch(key):
        raise ModelsFileError(
            f"{where}: key {key!r} must be 1 to 32 lower-case letters, digits, '_', '-' "
            "or '.', starting with a letter or digit."
        )
    label = table.get("label", "").strip()
    if len(label) > LABEL_MAX_CHARS:
        raise ModelsFileError(f"{where}: label is over {LABEL_MAX_CHARS} characters.")
    key_env = table.get("api_key_env", "").strip()
    if key_env and not ENV_NAME_PATTERN.fullmatch(key_env):
        raise ModelsFileError(
            f"{where}: api_key_env must name an environment variable, not {key_env!r}."
        )
    values = {name: table[name] for name in kinds if name in table}
    for name, value in values.items():
        if isinstance(value, str):
            values[name] = value.strip()
        elif isinstance(value, int | float) and value < 0:
            raise ModelsFileError(f"{where}: {name} must not be negative, not {value!r}.")
    # A model of the file starts from the primary model's client options (time-out,
    # retries), never from its provider, model, endpoint, key or context.
    inherited = {name: getattr(base, name) for name in INHERITED if hasattr(base, name)}
    api_key = environ.get(key_env, "").strip() if key_env else ""
    config = ModelConfig(**{**inherited, **values}, api_key=api_key)
    in_file = f"{where} ({key})"
    names = {name: f"{name} in {in_file}" for name in kinds}
    names["api_key"] = key_env or f"api_key_env in {in_file}"
    return ConfiguredModel(key=key, config=config, label=label, source=in_file, setting_names=names)


def load_models_file(
    path: str | Path,
    *,
    base: ModelConfig,
    environ: Mapping[str, str] | None = None,
    setting: str = "AGENT_MODELS_FILE",
) -> list[ConfiguredModel]:
    """Return the models a TOML file lists, in its order.

    The file holds ``[[models]]`` tables with ``key`` and ``provider`` (required),
    ``label``, ``api_key_env`` and any other :class:`ModelConfig` field but ``api_key``
    (``model``, ``base_url``, ``temperature``, ``timeout_s``, ``max_retries``...). Unset
    client options (:data:`INHERITED`) come from ``base`` (the primary model's). Keys
    are read from ``environ`` (default ``os.environ``) by the names ``api_key_env`` gives.

    Raises :class:`ModelsFileError` for a file that is missing or not TOML, a table with
    an unknown field, a wrong type, a bad key, a key used twice (``default`` and ``demo``
    are taken) or an ``api_key`` in the file.
    """
    environ = os.environ if environ is None else environ
    where = f"{setting} ({path})"
    try:
        data = read_toml(path, where)
    except DefinitionError as exc:
        raise ModelsFileError(str(exc)) from None
    unknown = sorted(set(data) - {"models"})
    if unknown:
        raise ModelsFileError(
            f"{where} has {', '.join(map(repr, unknown))} at its top level; each model is "
            "a [[models]] table."
        )
    tables = data.get("models", [])
    if not isinstance(tables, list):
        raise ModelsFileError(f"{where}: write each model as a [[models]] table.")
    models: list[ConfiguredModel] = []
    taken = {PRIMARY_KEY: "the primary model", DEMO_KEY: "the offline demo"}
    for number, table in enumerate(tables, start=1):
        model = _model_from_table(table, f"{where} [[models]] #{number}", base, environ)
        if model.key in taken:
            raise ModelsFileError(
                f"{where} [[models]] #{number}: key {model.key!r} is taken by "
                f"{taken[model.key]}; pick another."
            )
        taken[model.key] = f"[[models]] #{number}"
        models.append(model)
    return models
