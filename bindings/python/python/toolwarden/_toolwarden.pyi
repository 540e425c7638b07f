"""Type stubs of the compiled core of ``toolwarden`` (PyO3)."""

import os
from typing import Any, Dict, List, Literal, Optional, Sequence, TypeVar, Union, final

__version__: str
__all__ = [
    "Policy",
    "PolicyWatcher",
    "Request",
    "Intent",
    "Turn",
    "PendingCall",
    "Session",
    "Verdict",
    "ToolSet",
    "Diagnostic",
    "PolicyError",
    "RequestError",
    "__version__",
]

_DecisionName = Literal["allow", "confirm", "deny"]
_StageName = Literal[
    "identity",
    "connector",
    "tenant",
    "role",
    "permission",
    "mode",
    "intent",
    "tenant_arg",
    "requires",
    "arguments",
    "flow",
    "confirmation",
    "turn_limit",
]
_ToolSchema = Dict[str, Any]
"""An OpenAI (``{"type": "function", "function": {"name": ...}}`` or the Responses API's flat
``{"type": "function", "name": ...}``), Anthropic (``{"name": ..., "input_schema": ...}``) or MCP
(``{"name": ..., "inputSchema": ..., "annotations": {...}}``) tool schema."""

_Tool = TypeVar("_Tool", bound=Union[str, Dict[str, Any]])
_IntentArg = Union["Intent", str, Sequence[str], None]
_PathArg = Union[str, "os.PathLike[str]"]

class PolicyError(Exception):
    """A policy failed to load. ``str(err)`` is the rendered report (file:line:col, the source
    line, a caret, the message and the help, then a summary line)."""

    diagnostics: List[Diagnostic]
    """Every diagnostic found (errors and warnings), in file and position order."""

class RequestError(ValueError):
    """The request names a mode, connector tier or intent the policy does not declare, or gives
    no mode when the policy has no ``default mode``."""

@final
class Diagnostic:
    """One message about policy text. ``str(d)`` is the rendered report."""

    @property
    def severity(self) -> Literal["error", "warning"]: ...
    @property
    def code(self) -> str:
        """A stable kebab-case code such as ``"undefined-effect"``."""
    @property
    def message(self) -> str: ...
    @property
    def file(self) -> Optional[str]: ...
    @property
    def line(self) -> Optional[int]:
        """1-based line, or ``None`` when the problem has no place (an unreadable file)."""
    @property
    def column(self) -> Optional[int]:
        """1-based column in characters, or ``None``."""
    @property
    def text(self) -> Optional[str]:
        """The source text the diagnostic is about."""
    @property
    def help(self) -> Optional[str]:
        """What to write instead, when known."""
    @property
    def notes(self) -> List[str]: ...
    @property
    def rendered(self) -> str: ...
    def to_dict(self) -> Dict[str, Any]:
        """severity, code, message, file, line, column, text, help, notes."""

@final
class Request:
    """Who is asking, in which mode. ``mode=None`` uses the policy's ``default mode``.

    In ``connectors``, a tier mapped to a list is an allowlist of servers (``[]`` means zero
    connectors, never "unrestricted"); a tier mapped to ``None`` is left unset. ``forced`` names
    skip the intent stage (a confirmation in flight)."""

    def __new__(
        cls,
        *,
        mode: Optional[str] = None,
        roles: Optional[Sequence[str]] = None,
        permissions: Optional[Sequence[str]] = None,
        tenant: Optional[str] = None,
        connectors: Optional[Dict[str, Optional[Sequence[str]]]] = None,
        forced: Optional[Sequence[str]] = None,
        context: Optional[Dict[str, Sequence[str]]] = None,
    ) -> Request: ...
    @property
    def mode(self) -> Optional[str]: ...
    @property
    def context_names(self) -> List[str]:
        """The names of the ``context`` sets the request supplies, in the order given."""
    @property
    def roles(self) -> List[str]: ...
    @property
    def permissions(self) -> List[str]: ...
    @property
    def tenant(self) -> Optional[str]: ...
    @property
    def connectors(self) -> Dict[str, List[str]]: ...
    @property
    def forced(self) -> List[str]: ...
    def with_forced(self, names: Sequence[str]) -> Request:
        """A copy with ``forced`` replaced by ``names``."""
    def __eq__(self, other: object, /) -> bool: ...

@final
class Intent:
    """The classification of one query (``Policy.classify``) or an intent given by name."""

    @staticmethod
    def named(name: str) -> Intent: ...
    @staticmethod
    def union(names: Sequence[str]) -> Intent: ...
    @property
    def name(self) -> str:
        """The deciding intent."""
    @property
    def intents(self) -> List[str]:
        """Every intent that counts (several under ``combine union``)."""
    @property
    def hits(self) -> List[Dict[str, Any]]:
        """Keyword hits that counted: ``keyword``, ``intent``, ``lang``, ``span`` (byte range)."""
    @property
    def dropped(self) -> List[Dict[str, Any]]:
        """Hits a negator cancelled, each with ``negated_by``."""
    @property
    def fallback(self) -> bool: ...
    @property
    def truncated(self) -> bool: ...
    def to_dict(self) -> Dict[str, Any]: ...
    def __eq__(self, other: object, /) -> bool: ...

@final
class Turn:
    """What one user turn has executed so far; ``check_call`` updates it in place, atomically
    (threads may share one ``Turn``: the limit check and the count happen under one lock)."""

    transactional_calls: int
    def __new__(cls, transactional_calls: int = 0) -> Turn: ...
    def __eq__(self, other: object, /) -> bool: ...

@final
class Session:
    """What one agent session has seen: its flow labels (with the tool, turn and time that put
    each there), the turn's transactional calls and the call awaiting confirmation. Pass it as
    ``check_call(..., session=...)`` and ``offer(..., session=...)``; it pickles through
    ``to_json()``."""

    labels: List[Dict[str, Any]]
    turn: int
    transactional_calls: int
    pending: Optional[PendingCall]
    def __new__(cls) -> Session: ...
    @staticmethod
    def from_json(text: str, policy: Policy) -> Session:
        """Raises ``ValueError`` for a corrupt text, another policy's or version's session, or
        a label the policy does not declare."""
    def to_json(self) -> str: ...
    def has_label(self, label: str) -> bool: ...
    def next_turn(self) -> None:
        """A new turn: its count starts from 0; the labels stay."""
    def declassify(self, label: str) -> Optional[Dict[str, Any]]:
        """Takes ``label`` off; returns its source dict, or ``None`` when it was not on."""
    def record(self, policy: Policy, tool: str) -> List[str]:
        """Adds the labels ``tool`` taints (a call run without the guard); returns the new ones."""
    def __eq__(self, other: object, /) -> bool: ...

@final
class PendingCall:
    """A call held until the user confirms it (``transaction_status == "AWAITING_CONFIRMATION"``)."""

    @staticmethod
    def from_dict(data: Dict[str, Any]) -> PendingCall:
        """Raises ``ValueError`` when ``data`` is not a pending call's dict."""
    @staticmethod
    def from_json(text: str) -> PendingCall: ...
    def to_dict(self) -> Dict[str, Any]: ...
    def to_json(self) -> str: ...
    @property
    def tool(self) -> str: ...
    @property
    def args(self) -> Dict[str, Any]:
        """The arguments, confirmation fields removed."""
    @property
    def digest(self) -> str: ...
    @property
    def transaction_status(self) -> str: ...
    @property
    def policy(self) -> str: ...
    @property
    def policy_version(self) -> Optional[int]: ...
    def __eq__(self, other: object, /) -> bool: ...

@final
class ToolSet:
    """A prepared tool set from ``policy.tools(tools)``; ``offer`` returns its very objects."""

    @property
    def names(self) -> List[str]: ...
    @property
    def items(self) -> tuple[Any, ...]: ...
    def __len__(self) -> int: ...

@final
class Verdict:
    """The answer of ``Policy.check_call``."""

    @property
    def decision(self) -> _DecisionName: ...
    @property
    def tool(self) -> str: ...
    @property
    def stage(self) -> Optional[_StageName]:
        """The deciding stage; ``None`` for an allow."""
    @property
    def reason(self) -> str: ...
    @property
    def effect(self) -> Optional[str]: ...
    @property
    def operation_type(self) -> Optional[Literal["read_only", "transactional"]]: ...
    @property
    def source(self) -> Optional[str]:
        """``file:line:col`` of the deciding rule."""
    @property
    def args_for_execution(self) -> Optional[Dict[str, Any]]:
        """On allow: the arguments to execute, confirmation fields removed."""
    @property
    def pending(self) -> Optional[PendingCall]:
        """On confirm: the call awaiting confirmation."""
    @property
    def missing(self) -> List[str]: ...
    @property
    def rules(self) -> List[Dict[str, Any]]:
        """The argument rules that fired: `source`, `outcome`, `reference`, `value`, `problem`."""
    @property
    def confirmation_received(self) -> bool: ...
    @property
    def is_allowed(self) -> bool: ...
    @property
    def needs_confirmation(self) -> bool: ...
    @property
    def is_denied(self) -> bool: ...
    def to_dict(self) -> Dict[str, Any]:
        """Seed 004's result shape (``ok``, ``error``, ``metadata.blocked_by_policy``, ...)."""
    def to_json(self) -> str: ...

@final
class PolicyWatcher:
    """Keeps a policy loaded and reloads it on change; a broken edit never replaces it."""

    def __new__(cls, path: str | os.PathLike[str], watch: bool = True) -> PolicyWatcher: ...
    def policy(self) -> Policy: ...
    @property
    def generation(self) -> int: ...
    @property
    def rejected(self) -> int: ...
    @property
    def last_error(self) -> str | None: ...
    def reload_now(self) -> int: ...

@final
class Policy:
    """A compiled, immutable policy, shareable across threads."""

    @staticmethod
    def from_file(path: _PathArg) -> Policy:
        """Raises ``PolicyError``."""
    @staticmethod
    def parse(text: str, name: Optional[str] = None) -> Policy:
        """Raises ``PolicyError``. ``name`` (default ``"<string>"``) labels diagnostics; ``include``s
        resolve relative to its folder."""
    @staticmethod
    def from_yaml(path: _PathArg, legacy: Optional[_PathArg] = None) -> Policy:
        """Seed 004's ``tool_policies.yaml`` (+ legacy ``tools.yaml``). Raises ``PolicyError``."""
    @property
    def name(self) -> str: ...
    @property
    def version(self) -> Optional[int]: ...
    @property
    def warnings(self) -> List[Diagnostic]: ...
    @property
    def effects(self) -> List[str]: ...
    @property
    def intents(self) -> List[str]: ...
    @property
    def modes(self) -> List[str]: ...
    @property
    def default_mode(self) -> Optional[str]: ...
    @property
    def tool_names(self) -> List[str]: ...
    def tools(self, tools: Sequence[_Tool]) -> ToolSet:
        """A prepared tool set for ``offer``: the names (and schemas' names and MCP annotations)
        read once. Raises ``TypeError``, ``ValueError`` (a schema without a name)."""
    @property
    def roles(self) -> List[str]: ...
    @property
    def permissions(self) -> List[str]: ...
    @property
    def tiers(self) -> List[str]: ...
    def classify(self, text: str) -> Intent: ...
    def offer(
        self,
        request: Request,
        tools: Union[Sequence[_Tool], ToolSet],
        query: Optional[str] = None,
        intent: _IntentArg = None,
        *,
        session: Optional[Session] = None,
    ) -> List[Any]:
        """The visible tools (allow or confirm), in input order, as the very objects given.

        With ``session`` (not changed), a tool whose effect an ``after`` block denies under the
        session's labels is hidden.

        Raises ``RequestError``, ``ValueError`` (a schema without a name), ``TypeError``."""
    def explain(
        self,
        request: Request,
        tool: str,
        query: Optional[str] = None,
        intent: _IntentArg = None,
    ) -> Dict[str, Any]:
        """``{"tool", "decision", "stage", "reason", "source"}`` for one tool, as ``offer``."""
    def check_call(
        self,
        request: Request,
        tool: str,
        args: Union[Dict[str, Any], str],
        turn: Optional[Turn] = None,
        pending: Union[PendingCall, Dict[str, Any], None] = None,
        query: Optional[str] = None,
        intent: _IntentArg = None,
        *,
        strict: bool = True,
        session: Optional[Session] = None,
    ) -> Verdict:
        """Judges one call. ``args`` may be the model's JSON text. With ``strict`` (the default)
        a confirmation is trusted only against ``pending``: a confirmed call with no pending
        call is denied. A ``pending`` call matching this call exempts its tool from the intent
        stage. Raises ``RequestError``, ``ValueError`` (bad JSON text), ``TypeError``."""
    def strip_confirmation(self, args: Union[Dict[str, Any], str]) -> Dict[str, Any]:
        """A new dict of ``args`` without the policy's ``confirm fields``: judge the model's own
        call with it, so that a model confirming itself still reaches the user. Raises
        ``ValueError`` (text that is not a JSON object), ``TypeError``."""
