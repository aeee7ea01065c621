"""Named, declarative placement policies.

A policy is a list of profiles (first whose ``match`` fits the pod wins; a profile without
``match`` serves every pod), each a kube-scheduler-like profile of filters and weighted
scorers, plus optional mutators that play the part of an API client changing the pod before
it is created. Policies are written as YAML; see ``docs/configuration.md``.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType, UnionType
from typing import Any, Literal

import numpy as np
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PydanticUserError,
    TypeAdapter,
    ValidationError,
    field_validator,
)

from stickypack.core import plugins as p
from stickypack.core.framework import (
    FilterPlugin,
    NodeScan,
    PluginContractError,
    PodMutator,
    Profile,
    SchedulingContext,
    ScorePlugin,
    WeightedScorer,
)
from stickypack.core.nodetable import NodeTable
from stickypack.core.pod import Pod
from stickypack.core.yamltext import YAMLTextError, load_yaml


class PolicyError(ValueError):
    """A policy document that is not valid; the message says what and where."""


_FILTERS: Mapping[str, Callable[..., FilterPlugin]] = MappingProxyType(
    {
        "NodeUnschedulable": p.NodeUnschedulable,
        "NodeReady": p.NodeReady,
        "NodeResourcesFit": p.NodeResourcesFitFilter,
        "TaintToleration": p.TaintTolerationFilter,
        "NodeAffinity": p.NodeAffinityFilter,
        "ScaleDownAware": p.ScaleDownAwareFilter,
        "DelayForLocality": p.DelayForLocality,
    }
)


def _node_resources_fit(strategy: str = "LeastAllocated", **args: Any) -> ScorePlugin:
    strategies: dict[str, Callable[..., ScorePlugin]] = {
        "LeastAllocated": p.LeastAllocated,
        "MostAllocated": p.MostAllocated,
        "RequestedToCapacityRatio": p.RequestedToCapacityRatio,
    }
    if strategy not in strategies:
        raise p.PluginArgsError(f"unknown strategy {strategy!r}; valid: {', '.join(strategies)}")
    return _call_with_args(strategies[strategy], args)


def _call_with_args(factory: Callable[..., Any], args: Mapping[str, Any]) -> Any:
    """``factory(**args)`` with each argument checked against the factory's type hints first
    (lax, as YAML is written: ``"false"`` is False, ``2.0`` is 2; ``2.5`` for an int, NaN or
    infinity for a float are refused). Raises ``PluginArgsError`` naming the argument."""
    signature = inspect.signature(factory)
    target = factory.__init__ if inspect.isclass(factory) else factory
    try:
        hints = typing.get_type_hints(target)
    except Exception:  # hints that do not resolve (a plugin of one's own): take values as given
        hints = {}
    checked: dict[str, Any] = {}
    for name, value in args.items():
        param = signature.parameters.get(name)
        if param is None and not any(q.kind is q.VAR_KEYWORD for q in signature.parameters.values()):
            valid = ", ".join(q for q in signature.parameters if q != "self") or "none"
            raise p.PluginArgsError(f"unknown argument {name!r}; valid: {valid}")
        hint = hints.get(name, Any)
        if isinstance(value, bool) and not _admits_bool(hint):  # pydantic would read true as 1
            raise p.PluginArgsError(f"{name}: expected a number, not {str(value).lower()}")
        try:
            adapter = TypeAdapter(hint, config=_ARGS_CONFIG)
        except PydanticUserError:  # a type pydantic cannot check (numpy arrays...): as given
            adapter = TypeAdapter(Any)
        try:
            checked[name] = adapter.validate_python(value)
        except ValidationError as exc:
            raise p.PluginArgsError(f"{name}: {exc.errors()[0]['msg']} ({value!r})") from None
    return factory(**checked)


_ARGS_CONFIG = ConfigDict(allow_inf_nan=False)


def _admits_bool(hint: Any) -> bool:
    """Whether an argument typed ``hint`` may be true or false (``bool``, ``Any``, ``object``,
    or a union or literal with one of them)."""
    if hint in (Any, bool, object):
        return True
    args = typing.get_args(hint)
    if typing.get_origin(hint) is typing.Literal:
        return any(isinstance(a, bool) for a in args)
    if typing.get_origin(hint) in (typing.Union, UnionType):
        return any(_admits_bool(a) for a in args)
    return False


_SCORERS: Mapping[str, Callable[..., ScorePlugin]] = MappingProxyType(
    {
        "NodeResourcesFit": _node_resources_fit,
        "LeastAllocated": p.LeastAllocated,
        "MostAllocated": p.MostAllocated,
        "RequestedToCapacityRatio": p.RequestedToCapacityRatio,
        "NodeResourcesBalancedAllocation": p.BalancedAllocation,
        "TaintToleration": p.TaintTolerationScore,
        "NodeAffinity": p.NodeAffinityScore,
        "InterPodAffinity": p.BuildAntiAffinity,
        "ImageLocality": p.ImageLocality,
        "PodTopologySpread": p.PodTopologySpreadScore,
        "BuildLocality": p.BuildLocality,
        "BuildHeadroom": p.BuildHeadroom,
        "NodeAge": p.NodeAge,
        "BuildSpread": p.BuildSpread,
        "CacheKeeper": p.CacheKeeper,
        "ScaleDownAware": p.ScaleDownAware,
        "DrainForecast": p.DrainForecast,
        "LifetimeAware": p.LifetimeAware,
    }
)

_MUTATORS: Mapping[str, Callable[..., PodMutator]] = MappingProxyType(
    {
        "BinderHubStickyBuilds": p.BinderHubStickyBuilds,
        "BinderHubAntiAffinity": p.BinderHubAntiAffinity,
    }
)


@dataclass(frozen=True)
class PluginRegistry:
    """The plugin names a policy may use, each with the factory that builds it from the
    YAML ``args``. Read-only: :meth:`with_plugins` returns a new registry, so adding a plugin
    changes no other caller's policies (no global state)."""

    filters: Mapping[str, Callable[..., FilterPlugin]]
    scorers: Mapping[str, Callable[..., ScorePlugin]]
    mutators: Mapping[str, Callable[..., PodMutator]]
    #: Names of the plugins added by :meth:`with_plugins`: a policy checks what they are
    #: built as and every answer of theirs (a mask or scores of the wrong type, length or range is a
    #: ``PluginContractError`` naming the plugin, not a wrong placement).
    checked: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        for name in ("filters", "scorers", "mutators"):
            object.__setattr__(self, name, MappingProxyType(dict(getattr(self, name))))

    def with_plugins(
        self,
        filters: Mapping[str, Callable[..., FilterPlugin]] | None = None,
        scorers: Mapping[str, Callable[..., ScorePlugin]] | None = None,
        mutators: Mapping[str, Callable[..., PodMutator]] | None = None,
    ) -> PluginRegistry:
        """This registry plus the given plugins (a name given again is replaced); the
        plugins given are checked in use (:attr:`checked`)."""
        return PluginRegistry(
            {**self.filters, **(filters or {})},
            {**self.scorers, **(scorers or {})},
            {**self.mutators, **(mutators or {})},
            self.checked | set(filters or {}) | set(scorers or {}) | set(mutators or {}),
        )


#: The built-in plugins, as the YAML policies name them.
BUILTIN_PLUGINS = PluginRegistry(_FILTERS, _SCORERS, _MUTATORS)


#: Largest score weight: kube-scheduler's ``Plugin.Weight`` is an int32, which also keeps
#: ``sum(weight * score)`` far inside int64.
MAX_WEIGHT = 2**31 - 1


class _PluginSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    plugin: str
    weight: int = Field(default=1, ge=0, le=MAX_WEIGHT)
    args: dict[str, Any] = Field(default_factory=dict)

    @field_validator("weight", mode="before")
    @classmethod
    def _not_a_boolean(cls, value: Any) -> Any:
        if isinstance(value, bool):  # pydantic would read `true` as 1
            raise ValueError(f"Input should be an integer, not {str(value).lower()}")
        return value


class _MatchSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    labels: dict[str, str] = Field(default_factory=dict)


class _ProfileSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    match: _MatchSpec = Field(default_factory=_MatchSpec)
    mutate: list[str | _PluginSpec] = Field(default_factory=list)
    filters: list[str | _PluginSpec]
    score: list[str | _PluginSpec]  # a bare name is weight 1


#: How a Dask cluster picks the workers it retires (:attr:`Policy.dask_retirement`).
DaskRetirement = Literal["distributed", "node-aware"]
DASK_RETIREMENTS: tuple[str, ...] = typing.get_args(DaskRetirement)


class _PolicySpec(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    description: str = ""
    profiles: list[_ProfileSpec] = Field(min_length=1)
    dask_retirement: DaskRetirement = "distributed"
    percentage_of_nodes_to_score: int = Field(default=0, ge=0, le=100, strict=True)


@dataclass(slots=True)
class Policy:
    """A named set of profiles; a pod is served by the first whose labels it matches."""

    name: str
    description: str
    profiles: list[Profile]
    #: Which workers a Dask cluster retires when it shrinks: ``distributed`` (its own
    #: choice, by data held, blind to nodes) or ``node-aware`` (stickypack.dask's plugin:
    #: :func:`stickypack.core.retirement.retirement_order`, so whole nodes empty). Not a
    #: kube-scheduler setting: it says what the deployment the policy stands for does.
    dask_retirement: DaskRetirement = "distributed"
    #: kube-scheduler's ``percentageOfNodesToScore`` for the policy's profiles: in a cluster
    #: of 100 nodes or more it scores only the first feasible nodes it finds, this percentage
    #: of the nodes (at least 100; 0: adaptive, ``50 - nodes / 125``, at least 5), from where
    #: its last search stopped (:class:`~stickypack.core.framework.NodeScan`); 100 scores
    #: every feasible node. ``render`` writes it into each profile it renders of the policy.
    percentage_of_nodes_to_score: int = 0

    def __post_init__(self) -> None:
        if self.dask_retirement not in DASK_RETIREMENTS:
            raise PolicyError(
                f"policy {self.name}: dask_retirement {self.dask_retirement!r}; "
                f"valid: {', '.join(DASK_RETIREMENTS)}"
            )
        percentage = self.percentage_of_nodes_to_score
        if isinstance(percentage, bool) or not isinstance(percentage, int) or not 0 <= percentage <= 100:
            raise PolicyError(
                f"policy {self.name}: percentage_of_nodes_to_score {percentage!r}; "
                "an integer 0..100 (0: kube-scheduler's adaptive percentage)"
            )

    def describe(self) -> dict[str, Any]:
        """The policy as a policy file writes it, every plugin argument given (defaults
        included); :func:`policy_from_dict` reads it back to the same policy."""
        return {
            "name": self.name,
            "description": self.description,
            "profiles": [p.describe() for p in self.profiles],
            "dask_retirement": self.dask_retirement,
            "percentage_of_nodes_to_score": self.percentage_of_nodes_to_score,
        }

    def profile_for(self, pod: Pod) -> Profile:
        """The first profile whose ``match`` labels the pod carries, else the last one."""
        for profile in self.profiles:
            if profile.matches(pod):
                return profile
        return self.profiles[-1]

    def prepare(
        self, pod: Pod, table: NodeTable, ctx: SchedulingContext, profile: Profile | None = None
    ) -> Pod:
        """Apply the mutators of ``profile`` (default: the one matching the pod) once, when
        the pod is created."""
        if profile is None:
            profile = self.profile_for(pod)
        for mutator in profile.mutators:
            changed = mutator.mutate(pod, table, ctx)
            if profile.checked and mutator in profile.checked and not isinstance(changed, Pod):
                raise PluginContractError(
                    f"mutate plugin {mutator.name} returned a {type(changed).__name__}; expected a Pod"
                )
            pod = changed
        return pod

    def select(
        self,
        pod: Pod,
        table: NodeTable,
        ctx: SchedulingContext,
        rng: np.random.Generator,
        scan: NodeScan | None = None,
    ) -> int | None:
        """The node row for ``pod``, or ``None`` when it fits nowhere; ``scan``: as
        :meth:`Profile.select`."""
        return self.profile_for(pod).select(pod, table, ctx, rng, scan)


def _spec(item: str | _PluginSpec) -> _PluginSpec:
    return _PluginSpec(plugin=item) if isinstance(item, str) else item


#: The class a plugin of each kind must be (checked for plugins from outside the package).
_BASES: Mapping[str, Any] = MappingProxyType(
    {"filter": FilterPlugin, "score": ScorePlugin, "mutate": PodMutator}
)


def _build(
    registry: Mapping[str, Callable[..., Any]],
    spec: _PluginSpec,
    where: str,
    kind: str,
    checked: frozenset[str] = frozenset(),
) -> Any:
    factory = registry.get(spec.plugin)
    if factory is None:
        raise PolicyError(
            f"{where}: unknown {kind} plugin {spec.plugin!r}; valid: {', '.join(sorted(registry))}"
        )
    own = spec.plugin in checked  # from outside the package: its failures are the user's
    try:
        plugin: Any = _call_with_args(factory, spec.args)
    except (TypeError, p.PluginArgsError) as exc:
        raise PolicyError(f"{where}: bad args for {spec.plugin}: {exc}") from exc
    except Exception as exc:
        if not own:
            raise
        raise PolicyError(f"{where}: {spec.plugin} failed to build: {type(exc).__name__}: {exc}") from None
    if own:
        base = _BASES[kind]
        if not isinstance(plugin, base):
            raise PolicyError(
                f"{where}: {spec.plugin} built a {type(plugin).__name__}, not a {kind} plugin "
                f"(subclass stickypack.core.{base.__name__})"
            )
        if plugin.name != spec.plugin:
            raise PolicyError(
                f"{where}: {spec.plugin} built a plugin named {plugin.name!r}; give its class "
                f"name = {spec.plugin!r} (the extender and policies --show go by it)"
            )
        plugin.given_args = dict(spec.args)
    return plugin


def _location(loc: tuple[int | str, ...]) -> str:
    """A pydantic error location as the docs write it: ``profiles[0].score[1].weight``."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part not in ("str", "_PluginSpec"):  # which member of a union failed: noise
            out += f".{part}" if out else str(part)
    return out or "<top>"


def _message(msg: str) -> str:
    if "_PluginSpec" in msg:
        return "expected a plugin name or a mapping {plugin, weight, args}"
    return msg


def _check_names_and_weights(spec: _PolicySpec, source: str) -> None:
    """What the schema cannot say: profile names are unique (the extender's metrics and
    ``render`` go by them), and only scorers have a weight (one on a filter or a mutator
    would be silently ignored)."""
    seen: set[str] = set()
    for pi, prof in enumerate(spec.profiles):
        if prof.name in seen:
            raise PolicyError(f"{source}: invalid policy: profiles[{pi}].name: {prof.name!r} is given twice")
        seen.add(prof.name)
        for kind, items in (("filters", prof.filters), ("mutate", prof.mutate)):
            for i, item in enumerate(items):
                if isinstance(item, _PluginSpec) and "weight" in item.model_fields_set:
                    raise PolicyError(
                        f"{source}: invalid policy: profiles[{pi}].{kind}[{i}]: {item.plugin} "
                        "takes no weight (only score plugins are weighed)"
                    )


def policy_from_dict(raw: Any, source: str = "<policy>", plugins: PluginRegistry = BUILTIN_PLUGINS) -> Policy:
    """Validate and build a policy from its YAML/JSON structure, with the plugins of
    ``plugins`` (the built-ins unless given)."""
    try:
        spec = _PolicySpec.model_validate(raw)
    except ValidationError as exc:
        errors = exc.errors()
        # a plugin entry is a name or a mapping: when the mapping is wrong, the "not a string"
        # error of the other branch only adds noise
        useful = [e for e in errors if "str" not in e["loc"]] or errors
        problems = "; ".join(f"{_location(e['loc'])}: {_message(e['msg'])}" for e in useful)
        raise PolicyError(f"{source}: invalid policy: {problems}") from None
    _check_names_and_weights(spec, source)
    profiles = []
    for pi, prof in enumerate(spec.profiles):
        where = f"{source}: profiles[{pi}] ({prof.name})"
        own = plugins.checked
        filters = [
            _build(plugins.filters, _spec(f), f"{where}.filters[{i}]", "filter", own)
            for i, f in enumerate(prof.filters)
        ]
        scorers = [
            WeightedScorer(
                _build(plugins.scorers, _spec(s), f"{where}.score[{i}]", "score", own), _spec(s).weight
            )
            for i, s in enumerate(prof.score)
        ]
        mutators = [
            _build(plugins.mutators, _spec(m), f"{where}.mutate[{i}]", "mutate", own)
            for i, m in enumerate(prof.mutate)
        ]
        checked = tuple(
            plugin
            for plugin, item in [
                *zip(filters, prof.filters, strict=True),
                *((ws.plugin, s) for ws, s in zip(scorers, prof.score, strict=True)),
                *zip(mutators, prof.mutate, strict=True),
            ]
            if _spec(item).plugin in plugins.checked
        )
        profiles.append(Profile(prof.name, filters, scorers, dict(prof.match.labels), mutators, checked))
    return Policy(
        spec.name, spec.description, profiles, spec.dask_retirement, spec.percentage_of_nodes_to_score
    )


def policy_from_yaml(
    text: str, source: str = "<policy>", plugins: PluginRegistry = BUILTIN_PLUGINS
) -> Policy:
    """Parse a YAML policy document (text, not a path: the core reads no files); see
    :func:`policy_from_dict` for ``plugins``."""
    try:
        raw = load_yaml(text, source)
    except YAMLTextError as exc:
        raise PolicyError(str(exc)) from None
    if not isinstance(raw, dict):
        raise PolicyError(f"{source}: a policy is a YAML mapping with name and profiles")
    return policy_from_dict(raw, source, plugins)
