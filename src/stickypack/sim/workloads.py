"""Workloads: what arrives when. Built once per run, seeded, the same for every policy.

Three kinds of job drive the engine:

- :class:`PodJob`: a pod created at ``t`` that runs ``duration`` seconds once bound, or
  until ``end_at`` (absolute) whichever the job sets (Dask workers end when their user
  leaves, bound or not);
- :class:`LaunchJob`: a BinderHub launch: a build first when ``needs_build``, then a user
  pod for ``session_s`` seconds;
- :class:`TrimJob`: a Dask cluster of ``group`` retires workers down to ``keep``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from stickypack.core.pod import BUILD_LABELS, BUILD_REPO_ANNOTATION, Pod
from stickypack.core.resources import CPU, MEMORY
from stickypack.sim.model import DASK_POOL, MAX_BYTES, BinderModel, DaskModel, NodePool
from stickypack.sim.traces import Launch

DAY = 86400.0


@dataclass(slots=True)
class PodJob:
    t: float
    pod: Pod
    duration: float | None = None
    end_at: float | None = None
    group: str | None = None


@dataclass(slots=True)
class LaunchJob:
    t: float
    repo: str
    session_s: float
    needs_build: bool
    build_cold_s: float
    #: The repo's image for this launch (a new tag when it builds) and its size in bytes.
    image: str = ""
    image_size: int = 0


@dataclass(slots=True)
class TrimJob:
    t: float
    group: str
    keep: int


Job = PodJob | LaunchJob | TrimJob


@dataclass(slots=True)
class Workload:
    """A named, time-ordered list of jobs, and the node pools it runs on."""

    name: str
    jobs: list[Job]
    pools: list[NodePool]
    binder: BinderModel = field(default_factory=BinderModel)
    notes: list[str] = field(default_factory=list)
    #: Sizes in bytes of the images its pods run besides the repos' (a launch carries its
    #: repo image's): repo2docker's, Dask's.
    image_sizes: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.jobs.sort(key=lambda j: j.t)


def _bare_pod(
    name: str,
    namespace: str,
    cpu_m: int,
    memory: int,
    labels: dict[str, str],
    annotations: dict[str, str] | None = None,
) -> Pod:
    """A pod with no controller, requesting ``cpu_m`` millicores and ``memory`` bytes."""
    return Pod(
        name=name,
        namespace=namespace,
        requests={CPU: cpu_m, MEMORY: memory},
        nonzero_cpu=cpu_m,
        nonzero_memory=memory,
        labels=labels,
        annotations=annotations or {},
    )


#: The image build pods run (mybinder.org's repo2docker in 2019).
BUILDER_IMAGE = "jupyter/repo2docker:0.8.0"
#: The image Dask worker pods run (dask-gateway's default).
DASK_WORKER_IMAGE = "ghcr.io/dask/dask-gateway:2024.1.0"


def repo_image(repo: str, version: int) -> str:
    """The image BinderHub names for ``repo`` at its ``version``-th build in a replay (0:
    the image it had before), as ``<registry>/r2d-<digest of the repo>:<version>``."""
    digest = hashlib.blake2b(repo.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()
    return f"gcr.io/binder/r2d-{digest}:{version}"


def user_pod(name: str, model: BinderModel, image: str = "") -> Pod:
    """A mybinder.org user server pod (bare: KubeSpawner creates it directly) running
    ``image`` (its repo's; none given: no image to score)."""
    labels = {"component": "singleuser-server", "app": "jupyterhub"}
    pod = _bare_pod(name, "binder", model.user_cpu_m, model.user_memory, labels)
    if image:
        pod.images = (image,)
    return pod


def build_pod(name: str, repo: str, model: BinderModel) -> Pod:
    """A BinderHub build pod (bare), annotated with the repo it builds, running repo2docker."""
    labels = {**BUILD_LABELS, "name": name}
    annotations = {BUILD_REPO_ANNOTATION: repo}
    pod = _bare_pod(name, "binder", model.build_cpu_m, model.build_memory, labels, annotations)
    pod.images = (BUILDER_IMAGE,)
    return pod


def worker_pod(name: str, user: str, model: DaskModel) -> Pod:
    """A Dask worker pod (bare, as dask-gateway creates them)."""
    labels = {
        "app.kubernetes.io/name": "dask-gateway",
        "app.kubernetes.io/component": "dask-worker",
        "gateway.dask.org/cluster": user,
    }
    pod = _bare_pod(name, "dask", model.worker_cpu_m, model.worker_memory, labels)
    pod.images = (DASK_WORKER_IMAGE,)
    return pod


def _lognormal(rng: np.random.Generator, median: float, sigma: float, size: int) -> np.ndarray:
    return median * np.exp(sigma * rng.standard_normal(size))


def binder_jobs(
    launches: Sequence[Launch], model: BinderModel, seed: int, load_scale: float = 1.0
) -> list[Job]:
    """Launch jobs from launch events, with the change, session and build models.

    ``load_scale`` replays the trace at that many times its rate: each launch is repeated
    ``floor(x)`` times, plus once more with probability ``x - floor(x)``, each copy at its
    own second within the event's minute (timestamps are rounded down to the minute).
    """
    if load_scale <= 0:
        raise ValueError("load scale must be > 0")
    rng = np.random.default_rng([seed, 1])
    whole = math.floor(load_scale)
    frac = load_scale - whole
    times: list[float] = []
    repos: list[str] = []
    extra = rng.random(len(launches)) < frac if frac else np.zeros(len(launches), dtype=bool)
    jitter_all = rng.random((len(launches), whole + 1)) * 60.0
    for i, launch in enumerate(launches):
        copies = whole + int(extra[i])
        for c in range(copies):
            times.append(launch.t + float(jitter_all[i, c]))
            repos.append(launch.repo)
    order = np.argsort(np.asarray(times), kind="stable")
    n = len(order)
    session = np.minimum(
        _lognormal(rng, model.session_median_s, model.session_sigma, n) + model.idle_cull_s,
        model.session_max_s,
    )
    cold = np.minimum(_lognormal(rng, model.build_median_s, model.build_sigma, n), model.build_max_s)
    u = rng.random(n)
    # A repo's next change comes an exponential gap after its first launch or its last build
    # (changes are a Poisson process, so the gap is memoryless); it is drawn once then, not
    # again at every launch that finds the image current.
    gap = (
        rng.exponential(DAY / model.changes_per_day, n) if model.changes_per_day > 0 else np.full(n, math.inf)
    )
    next_change: dict[str, float] = {}
    # Image sizes from a stream of their own, one per repo in order of first launch, so
    # adding them changed no other draw.
    size_rng = np.random.default_rng([seed, 6])
    version: dict[str, int] = {}
    size: dict[str, int] = {}
    jobs: list[Job] = []
    for k, i in enumerate(order):
        t, repo = times[i], repos[i]
        due = next_change.get(repo)
        # First launch in the replay: the image may or may not exist already. Later: it
        # builds when the repo changed since its image was built.
        needs = bool(u[k] < model.first_launch_build_prob) if due is None else t >= due
        if due is None or needs:
            next_change[repo] = t + float(gap[k])
        if due is None:
            drawn = _lognormal(size_rng, model.image_size_median, model.image_size_sigma, 1)[0]
            size[repo] = int(min(drawn, MAX_BYTES))
            version[repo] = 0
        if needs:
            version[repo] += 1
        image = repo_image(repo, version[repo])
        jobs.append(LaunchJob(t, repo, float(session[k]), needs, float(cold[k]), image, size[repo]))
    return jobs


def trace_workload(
    launches: Sequence[Launch],
    seed: int,
    load_scale: float = 1.0,
    model: BinderModel | None = None,
    pool: NodePool | None = None,
    name: str = "trace",
) -> Workload:
    """A mybinder.org trace replay on one user pool (builds and users share it)."""
    model = model or BinderModel()
    return Workload(
        name,
        binder_jobs(launches, model, seed, load_scale),
        [pool or NodePool()],
        model,
        image_sizes={BUILDER_IMAGE: model.builder_image_size},
    )


def binder_day(
    seed: int, load_scale: float = 1.0, launches_per_day: int = 12_800, model: BinderModel | None = None
) -> Workload:
    """A synthetic day shaped like the traces, for runs without data.

    Diurnal rate ``1 + 0.39 cos(2 pi (h - 14) / 24)`` (busiest hour 14:00 UTC at ~5.8% of the
    day); repo popularity: the top repo 45% of launches, the next nine 22%, 1,000 more
    repos sharing 33% by a Zipf law (exponent 1.1). Fitted to the 15 trace days: a day
    draws ~615 distinct repos, ~260 of them launched once, the ten most launched taking
    ~74% (traces: 631, 290 and 76% on average).
    """
    rng = np.random.default_rng([seed, 2])
    # thinning of a homogeneous Poisson process at the peak rate by the diurnal shape (the
    # shape's mean is 1, its peak 1.39): a Poisson number of launches, over the whole day
    # (cutting the kept times at a count once dropped the day's last two hours)
    candidates = np.sort(rng.random(int(rng.poisson(launches_per_day * 1.39))) * DAY)
    shape = (1 + 0.39 * np.cos(2 * np.pi * (candidates / 3600 - 14) / 24)) / 1.39
    times = candidates[rng.random(candidates.size) < shape]
    tail = 1.0 / np.arange(1, 1001) ** 1.1
    weights = np.concatenate(
        [[0.45], 0.22 * (0.8 ** np.arange(9)) / (0.8 ** np.arange(9)).sum(), 0.33 * tail / tail.sum()]
    )
    idx = rng.choice(weights.size, size=times.size, p=weights / weights.sum())
    launches = [
        Launch(float(t - (t % 60)), f"https://github.com/synthetic/repo-{i}")
        for t, i in zip(times, idx, strict=True)
    ]
    wl = trace_workload(launches, seed, load_scale, model=model, name="binder-day")
    wl.notes.append("synthetic day shaped like mybinder.org traces")
    return wl


def dask_burst(seed: int, model: DaskModel | None = None) -> Workload:
    """100 users x 10 workers grow the cluster to about 20 nodes, all leave, then 2 users
    start 10 workers each (5 minutes later, before idle nodes are removed) for 2 hours."""
    model = model or DaskModel()
    rng = np.random.default_rng([seed, 3])
    jobs: list[Job] = []
    for u in range(100):
        start = float(rng.random() * 600)
        leave = 3900.0 + float(rng.random() * 300)
        for w in range(10):
            jobs.append(
                PodJob(
                    start, worker_pod(f"u{u:03d}-w{w}", f"u{u:03d}", model), end_at=leave, group=f"u{u:03d}"
                )
            )
    for u in range(2):
        start = 4500.0 + 30.0 * u
        for w in range(10):
            jobs.append(
                PodJob(
                    start,
                    worker_pod(f"late{u}-w{w}", f"late{u}", model),
                    end_at=start + 7200.0,
                    group=f"late{u}",
                )
            )
    return Workload("dask-burst", jobs, [DASK_POOL], image_sizes={DASK_WORKER_IMAGE: model.worker_image_size})


def dask_adapt(seed: int, model: DaskModel | None = None, rounds: int = 3, keep: int = 10) -> Workload:
    """One user's adaptive cluster grows to 100 workers, trims to ``keep`` (10), ``rounds``
    times.

    Each round: 100 workers requested over 2 minutes, 20 minutes of work, a trim to
    ``keep`` workers (which ones: the policy's ``dask_retirement``), 18 quiet minutes.
    Runs on 8-core nodes.
    """
    if not 0 <= keep <= 100:
        raise ValueError(f"keep must be 0..100 workers, not {keep}")
    model = model or DaskModel()
    rng = np.random.default_rng([seed, 4])
    pool = NodePool(
        name="dask8",
        allocatable={CPU: 7_910, MEMORY: 29 * 1024**3, "pods": 110},
        price_per_hour=0.39,
        min_size=0,
    )
    jobs: list[Job] = []
    t = 0.0
    made = 0
    end = rounds * 2400.0 + 600.0
    for _ in range(rounds):
        for _ in range(100 - (keep if made else 0)):
            jobs.append(
                PodJob(
                    t + float(rng.random() * 120),
                    worker_pod(f"w{made:04d}", "u0", model),
                    end_at=end,
                    group="u0",
                )
            )
            made += 1
        jobs.append(TrimJob(t + 1320.0, "u0", keep))
        t += 2400.0
    return Workload("dask-adapt", jobs, [pool], image_sizes={DASK_WORKER_IMAGE: model.worker_image_size})


#: Scenario name -> builder(seed, load_scale, binder model, dask model).
SCENARIOS: dict[str, Callable[[int, float, BinderModel, DaskModel], Workload]] = {
    "dask-burst": lambda seed, load_scale, binder, dask: dask_burst(seed, dask),
    "dask-adapt": lambda seed, load_scale, binder, dask: dask_adapt(seed, dask),
    "binder-day": lambda seed, load_scale, binder, dask: binder_day(seed, load_scale, model=binder),
}
