"""Upstream profiles, learned from each replica's info endpoints (no generation spent) for
the models the upstream lists, beside the turn that first needs one and within one deadline;
kept per upstream URL and listed model in this process (bounded) and in the store (for every
worker), read again beside the turns once RECHECK_SECONDS old. A constraint the server
refuses is checked with one the proxy builds without any client's schema before it counts
against the server. What to make of the answers is `turn.constrained.profile`'s; the asking
itself is `info`'s. No lock is held across I/O."""

from __future__ import annotations

import hashlib
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import orjson

from ...base.config import Config, mask_url
from ...toolcalls.formats.spec import FormatSpec
from ...turn.constrained.dialects import (
    Constraint,
    Dialect,
    constrained_body,
    refused_field,
)
from ...turn.constrained.profile import (
    PROFILE_TTL_SECONDS,
    RECHECK_SECONDS,
    REFUSAL_SECONDS,
    Probes,
    UpstreamProfile,
    context_length_of,
    kind_hint,
    refreshed,
)
from ..runtime.background import native_lock, new_event, run_beside
from .client import Upstream
from .info import AUTH_REFUSED, PROBE_MESSAGES, PROBE_TOOL, PROBE_TOOLS, fetch, fetch_any, probe

PROBE_DEADLINE_SECONDS = 5.0  # the whole probe (every endpoint asked), and a turn's wait
LIST_BYTES = 1 << 20  # a model list, at most
LISTED_MAX = 256  # models of one upstream profiled at most (the list's first)
MODEL_ID_CHARS = 256  # a listed model id longer than this is not profiled
KNOWN_MAX = 1024  # profiles this process holds at most (the least used go first)
UNREAD_SECONDS = 10.0  # a model list that could not be read is not asked again before
REFUSALS_SHOWN = 32  # the last refusals seen, for health and the status page
CHECK_SECONDS = 60.0  # a refused field is checked against a server at most this often
_HINTED = ("vllm", "sglang", "llama.cpp")  # the kinds a model list names as its owner


class ProfileKeeper(Protocol):
    """Where profiles are kept for every worker: the store's profile area (`ResponseStore`'s
    `put_profile`, `get_profile`), named here so that this room needs nothing above it."""

    def put_profile(self, key: str, profile: bytes, ttl_seconds: float) -> bool: ...

    def get_profile(self, key: str) -> bytes | None: ...


@dataclass(frozen=True)
class Listing:
    """What an upstream's `/v1/models` lists: each model's entry by id (None: it lists none,
    and one profile serves whatever name a client sends; `unread`: it could not be read),
    and when it was read (monotonic)."""

    models: dict[str, dict[str, Any]] | None
    read_at: float
    unread: bool = False

    def served(self, model: str) -> str | None:
        """The listed model a client's name is profiled as: itself where listed, the only one
        where the upstream lists one (llama.cpp answers any name), "" where it lists none;
        None where it is not served (nothing is probed or kept for it)."""
        if self.unread:
            return None
        if self.models is None:
            return ""
        if model in self.models:
            return model
        return next(iter(self.models)) if len(self.models) == 1 else None


@dataclass(frozen=True)
class Refusal:
    """A constrained re-ask's field an upstream refused, as health and the status page show
    it: `blamed` "server" (a constraint built without any client schema was refused too:
    not sent again until `until`), "request" (only the client's own schemas were: nothing
    retired) or "checking"; `at`, `until`: wall-clock seconds."""

    upstream: str
    model: str
    field: str
    blamed: str
    at: float
    until: float = 0.0

    def record(self) -> dict[str, Any]:
        return {"upstream": self.upstream, "model": self.model, "field": self.field,
                "blamed": self.blamed, "at": round(self.at, 3), "until": round(self.until, 3)}


class Learning:
    """A profile being learned beside a turn: settled once with what was learned; `result`
    is the generic profile while it is not (its deadline passed: the turn goes on without)."""

    def __init__(self, profile: UpstreamProfile | None = None) -> None:
        self.profile = profile
        # what a waiter waits on (none for a learning settled as it is made: nobody waits)
        self._done = new_event() if profile is None else None

    def settle(self, profile: UpstreamProfile) -> None:
        """The profile learned (the first settles; later ones are not told)."""
        if self.profile is None:
            self.profile = profile
            assert self._done is not None  # (made with the learning, unsettled)
            self._done.set()

    def wait(self, timeout: float) -> bool:
        """Whether the profile is learned (within `timeout` seconds)."""
        if self.profile is not None:
            return True
        assert self._done is not None  # (as in `settle`)
        return bool(self._done.wait(max(0.0, timeout)))

    @property
    def settled(self) -> bool:
        return self.profile is not None

    def result(self) -> UpstreamProfile:
        """The profile learned, or the generic one (nothing learned in time)."""
        return self.profile if self.profile is not None else UpstreamProfile()


class Profiles:
    """The profiles this process knows, learned on first need or read from the store,
    where what one worker learned is kept for all workers, instances and restarts."""

    def __init__(self, clients: dict[str, Upstream], store: ProfileKeeper | None = None,
                 clock: Callable[[], float] = time.time,
                 deadline: float = PROBE_DEADLINE_SECONDS) -> None:
        self._clients = clients
        self._store = store
        self._clock = clock
        self.deadline = deadline
        self._known: OrderedDict[tuple[str, str], UpstreamProfile] = OrderedDict()
        self._listings: dict[str, Listing] = {}
        self._since: dict[str, float] = {}  # an upstream back from down: profiles older re-read
        # One learning at a time per (URL, listed model or list, credential): a wrong key's
        # learning (its probes refused: the generic profile) is never shared with another key.
        self._pending: dict[tuple[str, str, str], Learning] = {}
        self._checked: OrderedDict[tuple[str, str, str], float] = OrderedDict()
        self._refusals: deque[Refusal] = deque(maxlen=REFUSALS_SHOWN)
        # guards the maps above; never held across I/O, nor across any wait
        self._lock = native_lock()

    # -- what is known ------------------------------------------------------------------

    def known(self) -> dict[tuple[str, str], UpstreamProfile]:
        """Every profile held, by (upstream URL, listed model)."""
        now = self._clock()
        with self._lock:
            return {key: profile.current(now) for key, profile in self._known.items()}

    def refusals(self) -> list[dict[str, Any]]:
        """The last refusals seen (newest last), for health and the status page."""
        with self._lock:
            return [refusal.record() for refusal in self._refusals]

    def served(self, url: str, model: str) -> str | None:
        """The listed model `model` is profiled as on `url` (None: not known to be served
        there, or its list not read yet)."""
        with self._lock:
            listing = self._listings.get(url)
        return listing.served(model) if listing is not None else None

    # -- learning -----------------------------------------------------------------------

    def get(self, url: str, model: str, config: Config,
            headers: dict[str, str] | None = None) -> UpstreamProfile:
        """The profile of `model` on `url`, learned now when not known (within the probe's
        deadline: the generic profile when nothing came in time)."""
        learning = self.learning(url, model, config, headers)
        learning.wait(self.deadline)
        return learning.result()

    def learning(self, url: str, model: str, config: Config,
                 headers: dict[str, str] | None = None) -> Learning:
        """The profile of `model` on `url`, settled at once when known, else being learned
        beside the caller (who waits for it at most the probe's deadline, as it likes)."""
        auth = {k: v for k, v in (headers or {}).items() if k.lower() == "authorization"}
        now = time.monotonic()
        with self._lock:
            listing = self._listings.get(url)
        if listing is not None and now - listing.read_at >= (
                UNREAD_SECONDS if listing.unread else RECHECK_SECONDS):
            self._shared((url, "\0list"), auth, lambda: self._listed(url, config, auth))
            listing = None if listing.unread else listing  # (the old list serves meanwhile)
        if listing is not None:
            return self._of(url, listing.served(model), config, auth)

        def both() -> UpstreamProfile:  # once the list is read (or refused this key)
            learning = self._of(url, self.served(url, model), config, auth)
            learning.wait(self.deadline)
            return learning.result()
        return self._shared((url, "\0list"), auth, lambda: self._listed(url, config, auth),
                            then=both)

    def recheck(self, url: str) -> None:
        """`url` came back after it was down (perhaps another version now): its profiles
        are read again when next needed (refusals kept only if it is the same server)."""
        with self._lock:
            self._since[url] = self._clock()

    def _of(self, url: str, served: str | None, config: Config,
            auth: dict[str, str]) -> Learning:
        """The learning of the listed model `served` (None: not served, the generic
        profile, nothing probed or kept)."""
        now = self._clock()
        if served is None:
            return Learning(UpstreamProfile(learned_at=now))
        key = (url, served)
        with self._lock:
            profile = self._known.get(key)
            since = self._since.get(url, 0.0)
            if profile is not None:
                self._known.move_to_end(key)
        if profile is not None and self._usable(profile, since, now):
            if now - profile.learned_at >= RECHECK_SECONDS:  # read again beside the turns
                self._shared(key, auth, lambda: self._learn(url, served, config, auth, profile))
            return Learning(profile.current(now))
        return self._shared(key, auth, lambda: self._learn(url, served, config, auth, profile))

    @staticmethod
    def _usable(profile: UpstreamProfile, since: float, now: float) -> bool:
        """Whether a profile may still be used: within its TTL, and learned after its
        upstream last came back."""
        return not profile.stale(now) and profile.learned_at >= since

    def _shared(self, what: tuple[str, str], auth: dict[str, str], work: Callable[[], Any],
                then: Callable[[], UpstreamProfile] | None = None) -> Learning:
        """`work` beside the caller, once at a time per `what` and credential (who asks
        meanwhile with the same shares it), settling the learning with what it returns
        (`then`'s, when given: a learning for another name than the key's gets its own)."""
        key = (*what, credential(auth))
        with self._lock:
            shared = self._pending.get(key)
            if shared is None:
                shared = self._pending[key] = Learning()
                start = True
            else:
                start = False
        if then is not None:
            own = Learning()

            def after() -> None:
                try:
                    shared.wait(self.deadline)
                    own.settle(then())
                finally:
                    own.settle(UpstreamProfile(learned_at=self._clock()))
            if start:
                self._start(key, shared, work)
            run_beside(after, "upstream-profile")
            return own
        if start:
            self._start(key, shared, work)
        return shared

    def _start(self, key: tuple[str, str, str], learning: Learning,
               work: Callable[[], Any]) -> None:
        def run() -> None:
            try:
                value = work()
                learning.settle(value if isinstance(value, UpstreamProfile)
                                else UpstreamProfile(learned_at=self._clock()))
            finally:
                learning.settle(UpstreamProfile(learned_at=self._clock()))
                with self._lock:
                    if self._pending.get(key) is learning:
                        del self._pending[key]
        run_beside(run, "upstream-profile")

    def _listed(self, url: str, config: Config, auth: dict[str, str]) -> Listing | None:
        """`/v1/models` of `url`, read and remembered (None: refused for this key, 401 or
        403: not remembered, another key may read it)."""
        status, models = fetch(self._client(url), "GET", "/v1/models", None, auth, config,
                               time.monotonic() + self.deadline, LIST_BYTES)
        if status in AUTH_REFUSED:
            return None
        now = time.monotonic()
        if status is None:
            listing = Listing(None, now, unread=True)
        else:
            data = models.get("data") if isinstance(models, dict) else None
            if status == 200 and isinstance(data, list):
                entries: dict[str, dict[str, Any]] = {}
                for entry in data:
                    if len(entries) >= LISTED_MAX:
                        break
                    name = entry.get("id") if isinstance(entry, dict) else None
                    if isinstance(name, str) and 0 < len(name) <= MODEL_ID_CHARS:
                        entries[name] = {k: entry[k] for k in ("id", "owned_by", "max_model_len")
                                         if k in entry}
                listing = Listing(entries, now)
            else:
                listing = Listing(None, now)  # a server without a model list: one profile
        with self._lock:
            self._listings[url] = listing
        return listing

    def _learn(self, url: str, model: str, config: Config, auth: dict[str, str],
               base: UpstreamProfile | None) -> UpstreamProfile:
        """Learn the profile of the listed `model` (beside a turn): another worker's from
        the store when fresh, else from the info endpoints (kept, unless they refused the
        key: a wrong key's generic profile is never another key's)."""
        key = (url, model)
        now = self._clock()
        with self._lock:
            since = self._since.get(url, 0.0)
        if base is None:
            kept = self._kept(key)
            if kept is not None and not self._listed_as(kept, url, model):
                kept = None  # another server once at this URL left it (a port reused)
            if kept is not None and self._usable(kept, since, now):
                self._remember(key, kept)
                if now - kept.learned_at < RECHECK_SECONDS:
                    return kept.current(now)
            base = kept
        learned, refused = self._probe(url, model, config, auth)
        if refused:
            return learned
        # What another worker learned of refusals since is kept too (it may have blamed the
        # server for a field this worker never saw refused).
        profile = refreshed(self._kept(key), refreshed(base, learned, now), now)
        self._keep(key, profile)
        return profile.current(self._clock())

    def _listed_as(self, kept: UpstreamProfile, url: str, model: str) -> bool:
        """Whether the server's model list still tells of the server `kept` describes (its
        owner, and its window where it gives one)."""
        with self._lock:
            listing = self._listings.get(url)
        entry = (listing.models or {}).get(model) if listing is not None else None
        models = {"data": [entry]} if entry else None
        hint = kind_hint(models, model)
        if (hint or "") != (kept.kind if kept.kind in _HINTED else ""):
            return False
        window = context_length_of(kept.kind, Probes(models=models), model)
        return window is None or kept.context_length in (None, window)

    def _remember(self, key: tuple[str, str], profile: UpstreamProfile) -> None:
        with self._lock:
            self._known[key] = profile
            self._known.move_to_end(key)
            while len(self._known) > KNOWN_MAX:
                self._known.popitem(last=False)

    def _keep(self, key: tuple[str, str], profile: UpstreamProfile) -> None:
        """Know `profile` here, and keep it in the store for every other worker."""
        self._remember(key, profile)
        if self._store is not None:
            ttl = PROFILE_TTL_SECONDS - (self._clock() - profile.learned_at)
            self._store.put_profile(store_key(*key), orjson.dumps(profile.record()),
                                    max(ttl, 1.0))

    def _kept(self, key: tuple[str, str]) -> UpstreamProfile | None:
        """The profile another worker kept in the store, if any."""
        if self._store is None:
            return None
        data = self._store.get_profile(store_key(*key))
        try:
            record = orjson.loads(data) if data is not None else None
        except orjson.JSONDecodeError:
            return None
        return UpstreamProfile.from_record(record) if isinstance(record, dict) else None

    def _client(self, url: str) -> Upstream:
        return self._clients.get(url) or Upstream(url)

    def _probe(self, url: str, model: str, config: Config,
               auth: dict[str, str]) -> tuple[UpstreamProfile, bool]:
        """The profile the info endpoints make, all asked within one deadline, and whether
        the server refused the key (401/403: the profile is not kept)."""
        with self._lock:
            listing = self._listings.get(url)
        entry = (listing.models or {}).get(model) if listing is not None else None
        return probe(self._client(url), model, entry, config, auth,
                     time.monotonic() + self.deadline, self._clock())

    # -- refusals -----------------------------------------------------------------------

    def refused(self, url: str, model: str, dialect: Dialect, wrapper: FormatSpec | None,
                config: Config, headers: dict[str, str] | None = None) -> None:
        """A constrained re-ask in `dialect` was refused by `url`. The constraint held the
        client's own tool schemas (one the engine cannot compile is that client's, not the
        server's): the same dialect is asked, beside the turns, with a constraint the proxy
        builds of one empty tool; only if that is refused too is the field retired for the
        server (for REFUSAL_SECONDS, and the profile read again). Checked at most every
        CHECK_SECONDS per field; every refusal is told (`refusals`)."""
        served = self.served(url, model)
        if served is None:
            return
        now = self._clock()
        check = (url, served, dialect.field)
        with self._lock:
            profile = self._known.get((url, served))
            active = profile is not None and dialect.field in profile.current(now).refused
            last = self._checked.get(check)
            due = not active and (last is None or now - last >= CHECK_SECONDS)
            if due:
                self._checked[check] = now
                while len(self._checked) > KNOWN_MAX:
                    self._checked.popitem(last=False)
            self._refusals.append(Refusal(mask_url(url), served, dialect.field,
                                          "checking" if due else
                                          ("server" if active else "request"), now))
        if not due:
            return
        auth = {k: v for k, v in (headers or {}).items() if k.lower() == "authorization"}
        run_beside(lambda: self._check(url, served, dialect, wrapper, config, auth,
                                       profile.kind if profile else ""), "refusal-check")

    def _check(self, url: str, model: str, dialect: Dialect, wrapper: FormatSpec | None,
               config: Config, auth: dict[str, str], kind: str) -> None:
        """Ask `dialect` with the proxy's own constraint (one token); retire the field for
        the server only if that is refused too."""
        base = orjson.dumps({"model": model, "messages": PROBE_MESSAGES,
                             "tools": PROBE_TOOLS, "max_tokens": 1, "stream": False})
        try:
            body = constrained_body(base, dialect,
                                    Constraint({"probe": PROBE_TOOL}, True, False),
                                    wrapper, kind)
        except ValueError:
            return
        status, answer = fetch_any(self._client(url), body, auth, config, self.deadline)
        server = status is not None and refused_field(status, answer, dialect)
        now = self._clock()
        until = now + REFUSAL_SECONDS if server else 0.0
        if server:
            key = (url, model)
            with self._lock:
                profile = self._known.get(key)
            if profile is not None:
                self._keep(key, refreshed(self._kept(key), profile.refusing(dialect.field,
                                                                            until), now))
            self.recheck(url)
        with self._lock:
            self._refusals.append(Refusal(mask_url(url), model, dialect.field,
                                          "server" if server else "request", now, until))


def credential(auth: dict[str, str]) -> str:
    """A fixed-size hash of the credential a request carries upstream ("" without one): the
    key itself is never held in a map's key."""
    value = "\n".join(sorted(auth.values()))
    return hashlib.sha256(value.encode()).hexdigest()[:32] if value else ""


def store_key(url: str, model: str) -> str:
    """The store's key of a profile: a fixed-size hash of its upstream and listed model
    (no name of any length goes into a key)."""
    return hashlib.sha256(f"{url}|{model}".encode()).hexdigest()[:40]
