"""Batched, on-device Bradley–Terry aggregation of tournament outcomes (SPEC §6).

Latent log-strengths θ ∈ R^G per group, P(i ≻ j) = σ(θ_i − θ_j). With the mirrored match set M_sym
(every (i, j, s) also as (j, i, 1 − s)):

    L(θ) = − Σ_{(i,j,s) ∈ M_sym} w · [ s·log σ(θ_i − θ_j) + (1 − s)·log σ(θ_j − θ_i) ]  +  λ‖θ‖²

A mirrored copy contributes exactly the same two terms as its original, so mirroring doubles the data
term; it is kept (rather than folded into λ) so that λ means what SPEC §6 says.

Every solver works on the dense sufficient statistics of a group: the G×G matrix W with
W_ij = total (mirrored) weight of "i beats j" evidence. Then

    L(θ)   = − Σ_ij W_ij log σ(θ_i − θ_j) + λ‖θ‖²
    ∇_k L  =   Σ_j (N_kj P_kj − W_kj) + 2λθ_k                   N = W + Wᵀ,  P_kj = σ(θ_k − θ_j)
    ∇²L    =   diag(Σ_j N_kj P_kj (1 − P_kj)) − N ⊙ P ⊙ (1 − P) + 2λ I

so the cost of an iteration no longer depends on the number of matches M, and the matches are
touched once (a one-hot contraction). The Hessian is a weighted graph Laplacian plus 2λI: symmetric
positive definite for λ > 0, hence the exact `newton` solver.

Solvers (registry `SOLVERS`, chosen by name):
  - `newton`       damped Newton on the dense form, batched Cholesky; the default (see
                   `benchmarks/bt_fit.py`: the fastest by a wide margin at equal accuracy).
  - `lbfgs`        jaxopt.LBFGS (the design card's choice), vmapped over groups.
  - `optax_lbfgs`  optax.lbfgs with its zoom line search (maintained; jaxopt is no longer developed).
Host references, float64 and not jittable: `fit_bradley_terry_scipy` (per-group scipy L-BFGS-B on the
literal match-list objective, the paper's method) and `fit_bradley_terry_host` (NumPy Newton for one
small group, used by the live tournament's leaderboard).
"""

from __future__ import annotations

import dataclasses
import functools
import warnings
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np

from arena_jax.registry import Registry

DEFAULT_L2 = 0.1
DEFAULT_SOLVER = "newton"
# Shapes are bucketed to powers of two (at least these) so a run compiles a handful of programs.
MIN_MATCH_BUCKET = 8
MIN_BATCH_BUCKET = 1
# L counts every match twice (it and its mirror), so its Hessian is twice the curvature of "each judged
# match is one observation" (with prior λ/2, the same optimum): the Laplace covariance is 2·(∇²L)⁻¹.
LAPLACE_SCALE = 2.0


# ─────────────────────────────── dense statistics (shared by every solver) ───────────────────────────────


def win_matrix(first, second, outcome, weight, num_players: int, xp=jnp):
  """W [..., G, G]: mirrored weight of "i beats j" evidence (SPEC §6).

  A match (i, j, s, w) adds w·s to W_ij and w·(1 − s) to W_ji; its mirror adds the same again.
  Self-matches (i == j) carry no information and are ignored. Built with one segment sum over the
  flattened (group, i, j) cells: on CPU 10× cheaper than the equivalent one-hot contraction.
  """
  g = num_players
  batch_shape = first.shape[:-1]
  n = int(np.prod(batch_shape, dtype=np.int64))
  w = weight * (first != second)
  base = (xp.arange(n) * g * g).reshape(batch_shape + (1,))
  cells = xp.concatenate([first * g + second, second * g + first], -1) + base
  values = xp.concatenate([w * outcome, w * (1.0 - outcome)], -1)
  if xp is np:
    flat = np.bincount(cells.ravel(), values.ravel(), minlength=n * g * g)
  else:
    flat = jax.ops.segment_sum(values.ravel(), cells.ravel(), num_segments=n * g * g)
  return 2.0 * flat.reshape(batch_shape + (g, g)).astype(outcome.dtype)


def _pair_terms(theta, xp):
  """d_ij = θ_i − θ_j, e = exp(−|d|) and r = 1/(1 + e): one exp per pair serves L, ∇L and ∇²L.

  σ(d) = r (d ≥ 0) or e·r (d < 0); σ(d)(1 − σ(d)) = e·r²; log σ(d) = −log1p(e) + min(d, 0).
  This form never overflows and is exact at d = 0 (P = 1/2 for equal strengths).
  """
  d = theta[..., :, None] - theta[..., None, :]
  e = xp.exp(-xp.abs(d))
  return d, e, 1.0 / (1.0 + e)


def dense_loss(theta, w, l2, xp=jnp):
  """L(θ) on the dense form; theta [..., G], w [..., G, G]."""
  d = theta[..., :, None] - theta[..., None, :]
  log_sig = -xp.log1p(xp.exp(-xp.abs(d))) + xp.minimum(d, 0.0)
  return -(w * log_sig).sum((-1, -2)) + l2 * (theta * theta).sum(-1)


def dense_eval(theta, w, l2, xp=jnp, *, hessian: bool = True):
  """(L, ∇L, ∇²L) on the dense form (formulas in the module docstring), sharing the pair terms.

  With `hessian=False` returns (L, ∇L)."""
  d, e, r = _pair_terms(theta, xp)
  loss = -(w * (xp.minimum(d, 0.0) - xp.log1p(e))).sum((-1, -2)) + l2 * (theta * theta).sum(-1)
  n = w + xp.swapaxes(w, -1, -2)
  p = xp.where(d >= 0, r, e * r)
  grad = (n * p - w).sum(-1) + 2.0 * l2 * theta
  if not hessian:
    return loss, grad
  c = n * e * r * r
  eye = xp.eye(theta.shape[-1], dtype=theta.dtype)
  hess = eye * (c.sum(-1)[..., :, None] + 2.0 * l2) - c * (1.0 - eye)
  return loss, grad, hess


# ───────────────────────────────────────────── solvers ─────────────────────────────────────────────


@dataclasses.dataclass(frozen=True)
class SolverOptions:
  """Stopping rules shared by the solvers. `tol` bounds the last Newton step (newton) or the gradient
  norm (L-BFGS); `max_iter` caps the iterations of every group."""

  tol: float = 1e-6
  max_iter: int = 100


SolverFn = Callable[[jax.Array, float, SolverOptions], jax.Array]
SOLVERS: Registry[SolverFn] = Registry("Bradley–Terry solver")


def register_solver(name: str):
  """Registers `fn(w [B, G, G], l2, options) -> θ [B, G]` as a Bradley–Terry solver named `name`."""
  return SOLVERS.register(name)


# Step sizes tried in parallel by the Newton line search: the whole batch evaluates all of them at
# once (G² work each), which is cheaper on every backend than a sequential backtracking loop.
_NEWTON_STEPS = (1.0, 0.5, 0.25, 0.125, 1 / 16, 1 / 64, 1 / 256)


@register_solver("newton")
def _solve_newton(w, l2, options: SolverOptions):
  """Damped Newton with a batched Cholesky solve (exact gradient and Hessian of the dense form).

  Each iteration evaluates loss, gradient and Hessian together at the full-step point θ − δ; when
  every group passes the Armijo test (the common case) that evaluation is the next iterate's, so an
  iteration costs one pass over the pairs and one Cholesky. Groups that fail fall back to the
  shorter steps `_NEWTON_STEPS`, all evaluated at once.

  Stopping: Newton converges quadratically once it takes full steps, so after a full step δ the
  remaining error is O(‖δ‖²); the loop stops after a full step with max|δ| ≤ √tol, or any step
  with max|α·δ| ≤ tol, or `max_iter`.
  """
  alphas = jnp.asarray(_NEWTON_STEPS[1:], w.dtype)
  eps = jnp.finfo(w.dtype).eps
  sqrt_tol = float(np.sqrt(options.tol))

  def armijo(loss_new, loss0, alpha, slope):
    # A float-roundoff allowance keeps converged groups taking the (tiny) full Newton step instead
    # of stalling on a loss difference below precision.
    return loss_new <= loss0 + 16 * eps * (1.0 + jnp.abs(loss0)) - 1e-4 * alpha * slope

  def backtrack(theta, direction, loss0, slope):
    cand = theta[:, None, :] - alphas[None, :, None] * direction[:, None, :]
    ok = armijo(dense_loss(cand, w[:, None], l2), loss0[:, None], alphas[None, :], slope[:, None])
    alpha = jnp.where(ok.any(-1), alphas[jnp.argmax(ok, axis=-1)], alphas[-1])
    return alpha, dense_eval(theta - alpha[:, None] * direction, w, l2)

  def step(state):
    theta, (loss, grad, hess), _, it = state
    chol = jnp.linalg.cholesky(hess)
    direction = jax.scipy.linalg.cho_solve((chol, True), grad[..., None])[..., 0]
    slope = (grad * direction).sum(-1)
    trial = dense_eval(theta - direction, w, l2)
    full_ok = armijo(trial[0], loss, 1.0, slope)
    alpha, fallback = jax.lax.cond(
      full_ok.all(), lambda: (jnp.ones_like(loss), trial), lambda: backtrack(theta, direction, loss, slope)
    )
    pick = lambda a, b: jnp.where(full_ok.reshape(full_ok.shape + (1,) * (a.ndim - 1)), a, b)
    evaluated = jax.tree.map(pick, trial, fallback)
    alpha = jnp.where(full_ok, 1.0, alpha)
    size = jnp.abs(direction).max(-1)
    converged = jnp.where(alpha == 1.0, size <= sqrt_tol, alpha * size <= options.tol)
    return theta - alpha[:, None] * direction, evaluated, converged.all(), it + 1

  def cond(state):
    _, _, converged, it = state
    return ~converged & (it < options.max_iter)

  theta0 = jnp.zeros(w.shape[:-1], w.dtype)
  state = (theta0, dense_eval(theta0, w, l2), jnp.asarray(False), 0)
  return jax.lax.while_loop(cond, step, state)[0]


def _joint_value_and_grad(l2):
  """Value and closed-form gradient of Σ_groups L(θ_group): the groups are independent, so one
  L-BFGS run on the stacked [B, G] parameters solves them all without vmapping a line search
  (vmapped while-loops with nested line searches run ~100× slower on CPU)."""

  def value_and_grad(theta, w):
    value, grad = dense_eval(theta, w, l2, hessian=False)
    return value.sum(), grad

  return value_and_grad


def _scaled_grad_converged(grad, w, tol):
  """max_k |∇_k L| / (1 + N_k) ≤ tol, N_k = total games of player k: a gradient test that float32
  can meet whatever the amount of evidence (the rounding error of ∇_k grows with N_k)."""
  evidence = (w + jnp.swapaxes(w, -1, -2)).sum(-1)
  return (jnp.abs(grad) / (1.0 + evidence)).max() <= tol


@register_solver("lbfgs")
def _solve_jaxopt_lbfgs(w, l2, options: SolverOptions):
  """jaxopt.LBFGS (zoom line search) on all groups at once; stops on the scaled gradient test."""
  with warnings.catch_warnings():  # its "no longer maintained" notice is known (see optax_lbfgs)
    warnings.simplefilter("ignore", DeprecationWarning)
    import jaxopt  # pylint: disable=g-import-not-at-top  (kept local: only this solver needs it)

  solver = jaxopt.LBFGS(
    fun=_joint_value_and_grad(l2),
    value_and_grad=True,
    maxiter=options.max_iter,
    history_size=10,
    linesearch="zoom",
    implicit_diff=False,
  )
  theta0 = jnp.zeros(w.shape[:-1], w.dtype)

  def cond(carry):
    _, state = carry
    return (state.iter_num < options.max_iter) & ~_scaled_grad_converged(state.grad, w, options.tol)

  theta, _ = jax.lax.while_loop(
    cond, lambda c: tuple(solver.update(c[0], c[1], w)), (theta0, solver.init_state(theta0, w))
  )
  return theta


@register_solver("optax_lbfgs")
def _solve_optax_lbfgs(w, l2, options: SolverOptions):
  """optax.lbfgs (zoom line search) on all groups at once; stops on the scaled gradient test."""
  import optax  # pylint: disable=g-import-not-at-top
  import optax.tree_utils as otu  # pylint: disable=g-import-not-at-top

  value_and_grad_fn = _joint_value_and_grad(l2)
  fun = lambda theta: value_and_grad_fn(theta, w)[0]
  opt = optax.lbfgs(memory_size=10)
  cached_value_and_grad = optax.value_and_grad_from_state(fun)

  def step(carry):
    theta, state = carry
    value, grad = cached_value_and_grad(theta, state=state)
    updates, state = opt.update(grad, state, theta, value=value, grad=grad, value_fn=fun)
    return optax.apply_updates(theta, updates), state

  def cond(carry):
    _, state = carry
    it = otu.tree_get(state, "count")
    grad = otu.tree_get(state, "grad")
    return (it == 0) | ((it < options.max_iter) & ~_scaled_grad_converged(grad, w, options.tol))

  theta0 = jnp.zeros(w.shape[:-1], w.dtype)
  return jax.lax.while_loop(cond, step, (theta0, opt.init(theta0)))[0]


# ─────────────────────────────────────────── public API ───────────────────────────────────────────


def _bucket(n: int, minimum: int) -> int:
  """Smallest power of two ≥ max(n, minimum)."""
  n = max(int(n), minimum, 1)
  return 1 << (n - 1).bit_length()


ERRORS = ("laplace", "sandwich")


def standard_errors(theta, w, l2, first, second, outcome, weight, kind: str = "laplace"):
  """Per-player standard errors [..., G] of the fit θ [..., G] (batched, jittable; SPEC §6).

  laplace:  Σ = 2·(∇²L(θ))⁻¹, the inverse Hessian the Newton solver forms, scaled by `LAPLACE_SCALE`
            (L counts each match twice): the posterior covariance of θ when each judged match is one
            Bernoulli observation.
  sandwich: Σ = A⁻¹ J A⁻¹ with A = ∇²L/2 and J = Σ_m g_m g_mᵀ, g_m = w_m (σ(θ_i − θ_j) − s_m)(e_i − e_j)
            the score of match m: robust to outcomes that are not Bernoulli (soft outcomes, ties, a
            judge more or less consistent than the model says).
  Strengths are identified only up to a common shift (the L2 prior alone pins the level), so the
  errors are those of θ_i − θ̄, θ̄ the mean over the players with at least one match (all of them if
  none has one): SE_i = √(PΣPᵀ)_ii, P = I − 1mᵀ/|m|, m the 0/1 indicator of those players. (A player
  without a match — a failed judgment, a duplicate whose representative played for it — has only its
  prior, and must not blur the others' errors.) Computed from θ alone, so every solver gets the same
  errors at the same optimum.
  """
  if kind not in ERRORS:
    raise ValueError(f"errors must be one of {ERRORS}, got errors={kind!r}")
  g = theta.shape[-1]
  hess = dense_eval(theta, w, l2)[2]
  eye = jnp.eye(g, dtype=theta.dtype)
  chol = jnp.linalg.cholesky(hess)
  cov = LAPLACE_SCALE * jax.scipy.linalg.cho_solve((chol, True), jnp.broadcast_to(eye, hess.shape))
  if kind == "sandwich":
    d = jnp.take_along_axis(theta, first, -1) - jnp.take_along_axis(theta, second, -1)
    c = weight * (first != second) * (jax.nn.sigmoid(d) - outcome)
    k = win_matrix(first, second, jnp.full_like(outcome, 0.5), c * c, g)  # c² at (i, j) and at (j, i)
    meat = eye * k.sum(-1)[..., :, None] - k
    cov = cov @ meat @ cov
  played = (w.sum(-1) > 0).astype(theta.dtype)
  played = jnp.where(played.sum(-1, keepdims=True) > 0, played, 1.0)
  proj = eye - played[..., None, :] / played.sum(-1)[..., None, None]
  var = jnp.diagonal(proj @ cov @ jnp.swapaxes(proj, -1, -2), axis1=-2, axis2=-1)
  return jnp.sqrt(jnp.maximum(var, 0.0))


@functools.partial(jax.jit, static_argnames=("num_players", "l2", "solver", "options", "rewards", "errors"))
def _fit_jit(first, second, outcome, weight, *, num_players, l2, solver, options, rewards, errors=None):
  w = win_matrix(first, second, outcome, weight, num_players)
  theta = SOLVERS[solver](w, l2, options)  # a known name: `_prepare` checked it
  out = min_max_normalise(theta) if rewards else theta
  if errors is None:
    return out
  return out, standard_errors(theta, w, l2, first, second, outcome, weight, errors)


def _prepare(first, second, outcome, weight, num_players, l2, solver):
  """Validates and broadcasts the match arrays; returns them flattened to [N, M] and the batch shape.

  Host (NumPy / list) inputs are checked value by value and padded on the host, then moved to the
  device once. Device arrays (or tracers) stay on the device and skip the value checks, which would
  force a transfer; there an out-of-range index simply matches no player.
  """
  SOLVERS.get_or_raise(solver)
  if not isinstance(num_players, (int, np.integer)) or num_players < 1:
    raise ValueError(f"num_players must be a positive int, got {num_players!r}")
  if not l2 > 0:
    raise ValueError(f"l2 must be > 0 (it keeps undefeated players finite, SPEC §6), got l2={l2!r}")
  on_device = any(isinstance(a, jax.Array) for a in (first, second, outcome, weight))
  xp = jnp if on_device else np
  outcome = xp.asarray(outcome)
  if not xp.issubdtype(outcome.dtype, xp.floating):
    outcome = outcome.astype(np.float32)
  weight = xp.ones_like(outcome) if weight is None else xp.asarray(weight, outcome.dtype)
  first, second, outcome, weight = xp.broadcast_arrays(xp.asarray(first), xp.asarray(second), outcome, weight)
  if first.ndim == 0:
    raise ValueError("first/second/outcome/weight need a trailing match axis [..., M]")
  for name, a in (("first", first), ("second", second)):
    if not xp.issubdtype(a.dtype, xp.integer):
      raise ValueError(f"{name} must hold integer player indices, got dtype {a.dtype}")
  if not on_device:
    _check_values(first, second, outcome, weight, num_players)
  batch_shape, m = first.shape[:-1], first.shape[-1]
  n = int(np.prod(batch_shape, dtype=np.int64))
  flat = lambda a: a.reshape((n, m))
  return (flat(first).astype(np.int32), flat(second).astype(np.int32), flat(outcome), flat(weight)), batch_shape, xp


def _check_values(first, second, outcome, weight, num_players):
  """Range checks on host inputs, naming the offending field."""
  if not np.isfinite(weight).all() or (weight < 0).any():
    raise ValueError("weight must be finite and ≥ 0 (0 marks padding)")
  live = weight > 0
  f, s, o = first[live], second[live], outcome[live]
  for name, a in (("first", f), ("second", s)):
    bad = (a < 0) | (a >= num_players)
    if bad.any():
      raise ValueError(f"{name} holds player index {a[bad][0]} outside [0, num_players={num_players})")
  bad = ~((o >= 0) & (o <= 1))  # also catches NaN
  if bad.any():
    raise ValueError(f"outcome must lie in [0, 1] where weight > 0, got e.g. {o[bad][:3]}")


def _run(first, second, outcome, weight, num_players, l2, solver, tol, max_iter, rewards, errors=None):
  if errors is not None and errors not in ERRORS:
    raise ValueError(f"errors must be None or one of {ERRORS}, got errors={errors!r}")
  (f, s, o, w), batch_shape, xp = _prepare(first, second, outcome, weight, num_players, l2, solver)
  n, m = f.shape
  nb, mb = _bucket(n, MIN_BATCH_BUCKET), _bucket(m, MIN_MATCH_BUCKET)
  pad = lambda a: xp.pad(a, ((0, nb - n), (0, mb - m)))  # zero weight: padding carries nothing
  out = _fit_jit(
    pad(f),
    pad(s),
    pad(o),
    pad(w),
    num_players=int(num_players),
    l2=float(l2),
    solver=solver,
    options=SolverOptions(tol=float(tol), max_iter=int(max_iter)),
    rewards=rewards,
    errors=errors,
  )
  unpad = lambda a: a[:n].reshape(tuple(batch_shape) + (num_players,))
  return unpad(out) if errors is None else tuple(unpad(a) for a in out)


def fit_bradley_terry(
  first,
  second,
  outcome,
  weight,
  num_players: int,
  *,
  l2: float = DEFAULT_L2,
  solver: str = DEFAULT_SOLVER,
  tol: float = 1e-6,
  max_iter: int = 100,
  errors: str | None = None,
):
  """Fits Bradley–Terry log-strengths θ [..., num_players] to soft outcomes (SPEC §6).

  Args:
    first, second: int [..., M] player indices of each match; leading dims are batch (one group each).
    outcome: float [..., M], the soft score of `first` (SPEC §4); ties are 1/2 and count half-half.
    weight: float [..., M] (or None for all ones); 0 marks padding.
    num_players: G, the players per group.
    l2: λ > 0 in L(θ) (default 0.1).
    solver: a name in `SOLVERS` ("newton", "lbfgs", "optax_lbfgs").
    tol, max_iter: stopping rules (see `SolverOptions`).
    errors: None, or "laplace" / "sandwich": also return per-player standard errors [..., num_players]
      (`standard_errors`), computed in the same jitted, batched call: then the result is (θ, se).

  The batch and match axes are padded to powers of two before the jitted fit, so varying numbers of
  groups or matches per step reuse a few compiled programs. Mirroring happens inside.
  """
  return _run(first, second, outcome, weight, num_players, l2, solver, tol, max_iter, rewards=False, errors=errors)


def bt_rewards(
  first,
  second,
  outcome,
  weight,
  num_players: int,
  *,
  l2: float = DEFAULT_L2,
  solver: str = DEFAULT_SOLVER,
  tol: float = 1e-6,
  max_iter: int = 100,
):
  """`fit_bradley_terry` followed by min–max normalisation per group: rewards in [0, 1] (SPEC §6)."""
  return _run(first, second, outcome, weight, num_players, l2, solver, tol, max_iter, rewards=True)


def min_max_normalise(theta, eps: float = 1e-6):
  """r_i = (θ_i − min θ)/(max θ − min θ) per group; every reward is 1/2 when max − min ≤ eps (SPEC §6)."""
  lo = theta.min(-1, keepdims=True)
  span = theta.max(-1, keepdims=True) - lo
  flat = span <= eps
  return jnp.where(flat, 0.5, (theta - lo) / jnp.where(flat, 1.0, span))


# ──────────────────────────────────────── host references (float64) ────────────────────────────────────────


def fit_bradley_terry_host(
  first,
  second,
  outcome,
  weight,
  num_players: int,
  *,
  l2: float = DEFAULT_L2,
  init=None,
  tol: float = 1e-10,
  max_iter: int = 100,
) -> np.ndarray:
  """Float64 NumPy Newton fit of ONE group (1-D match arrays); cheap for the small G of a group.

  Used on the host by schedulers that need current strengths between judge calls (the live
  tournament's leaderboard); `init` warm-starts from the previous fit.
  """
  f, s = np.asarray(first, np.int64), np.asarray(second, np.int64)
  o = np.asarray(outcome, np.float64)
  wt = np.ones_like(o) if weight is None else np.asarray(weight, np.float64)
  w = win_matrix(f, s, o, wt, num_players, xp=np)
  theta = np.zeros(num_players) if init is None else np.array(init, np.float64)
  for _ in range(max_iter):
    loss, grad, hess = dense_eval(theta, w, l2, xp=np)
    direction = np.linalg.solve(hess, grad)
    for alpha in _NEWTON_STEPS:  # backtracking: Newton alone can overshoot on the logistic loss
      cand = theta - alpha * direction
      cand_loss = dense_loss(cand, w, l2, xp=np)
      if cand_loss <= loss - 1e-4 * alpha * grad @ direction:
        break
    theta = cand
    if np.abs(alpha * direction).max() <= tol:
      break
  return theta


def laplace_covariance_host(
  first, second, outcome, weight, num_players: int, theta, *, l2: float = DEFAULT_L2
) -> np.ndarray:
  """Float64 Laplace covariance Σ = 2·(∇²L(θ))⁻¹ of ONE group at the fit θ (see `LAPLACE_SCALE`)."""
  f, s = np.asarray(first, np.int64), np.asarray(second, np.int64)
  o = np.asarray(outcome, np.float64)
  wt = np.ones_like(o) if weight is None else np.asarray(weight, np.float64)
  w = win_matrix(f, s, o, wt, num_players, xp=np)
  hess = dense_eval(np.asarray(theta, np.float64), w, l2, xp=np)[2]
  return LAPLACE_SCALE * np.linalg.inv(hess)


def fit_bradley_terry_scipy(
  first, second, outcome, weight, num_players: int, *, l2: float = DEFAULT_L2, gtol: float = 1e-10
) -> np.ndarray:
  """Reference: scipy L-BFGS-B per group, float64, on the literal mirrored match-list objective.

  Shapes as `fit_bradley_terry`. This is the paper's method (a host loop over groups) and the
  correctness oracle of the tests and the benchmark; it shares no code with the dense solvers.
  """
  import scipy.optimize  # pylint: disable=g-import-not-at-top

  first, second, outcome, weight = np.broadcast_arrays(
    np.asarray(first),
    np.asarray(second),
    np.asarray(outcome, np.float64),
    np.ones(np.shape(outcome)) if weight is None else np.asarray(weight, np.float64),
  )
  batch_shape, m = first.shape[:-1], first.shape[-1]
  out = np.zeros((int(np.prod(batch_shape, dtype=np.int64)), num_players))
  rows = zip(*(a.reshape(-1, m) for a in (first, second, outcome, weight)))
  for b, (f, s, o, w) in enumerate(rows):
    keep = (w > 0) & (f != s)
    f, s, o, w = f[keep], s[keep], o[keep], w[keep]
    # The mirrored set M_sym, spelled out as SPEC §6 writes it.
    fi, si = np.concatenate([f, s]), np.concatenate([s, f])
    os_, ws = np.concatenate([o, 1.0 - o]), np.concatenate([w, w])

    def fun(theta):
      d = theta[fi] - theta[si]
      ls_pos, ls_neg = -np.logaddexp(0.0, -d), -np.logaddexp(0.0, d)
      value = -(ws * (os_ * ls_pos + (1.0 - os_) * ls_neg)).sum() + l2 * theta @ theta
      sig = 1.0 / (1.0 + np.exp(-d))
      coef = -ws * (os_ - sig)  # d value / d d
      grad = np.bincount(fi, coef, num_players) - np.bincount(si, coef, num_players) + 2.0 * l2 * theta
      return value, grad

    res = scipy.optimize.minimize(
      fun,
      np.zeros(num_players),
      jac=True,
      method="L-BFGS-B",
      options=dict(gtol=gtol, ftol=1e-15, maxiter=10_000, maxcor=20),
    )
    out[b] = res.x
  return out.reshape(batch_shape + (num_players,))
