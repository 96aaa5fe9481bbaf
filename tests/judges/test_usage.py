"""`Usage`: sequential cost adds up, concurrent cost takes the slowest latency."""

from arena_jax import judges


def test_sequential_usage_adds_every_field():
  a = judges.Usage(calls=1, http_requests=2, prompt_tokens=10, completion_tokens=3, latency_s=0.5)
  b = judges.Usage(calls=2, http_requests=2, prompt_tokens=5, completion_tokens=4, latency_s=0.25)
  assert a + b == judges.Usage(3, 4, 15, 7, 0.75)
  assert sum([a, b], judges.Usage()) == a + b
  assert (a + b).total_tokens == 22


def test_parallel_usage_adds_counts_and_keeps_the_slowest_latency():
  a = judges.Usage(calls=1, http_requests=1, prompt_tokens=10, completion_tokens=3, latency_s=0.5)
  b = judges.Usage(calls=1, http_requests=3, prompt_tokens=5, completion_tokens=4, latency_s=0.25)
  assert judges.Usage.parallel(a, b) == judges.Usage(2, 4, 15, 7, 0.5)
  assert judges.Usage.parallel(a) == a and judges.Usage.parallel() == judges.Usage()
