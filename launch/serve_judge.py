"""Serves the embedded judge: OpenAI-compatible `/v1/chat/completions`, `/v1/models`, `/health`.

    python -m launch.serve_judge --port 8000
    python -m launch.serve_judge --port 8000 --server.latency_ms=100 --server.noise=0.5 \
        --server.position_bias=0.3 --server.error_rate=0.05 --server.miss_rate=0.2

Every knob of `arena_jax.judges.server_config()` is a `--server.<knob>` flag. It binds 127.0.0.1
unless --host says otherwise; a bearer key is read from the env var named by --server.api_key_env.
This is the judge server's only command line (`judges.EmbeddedJudgeServer` starts its child without one).
"""

from absl import flags

from arena_jax import cli
from arena_jax import judges

_PORT = flags.DEFINE_integer("port", None, "TCP port (default: --server.port, 0 = any free port).")
_HOST = flags.DEFINE_string("host", None, "Interface to bind (default: --server.host, 127.0.0.1).")
_SERVER = cli.config_dict_flag("server", judges.server_config())


def main(argv):
  del argv
  cfg = _SERVER.value
  if _PORT.value is not None:
    cfg.port = _PORT.value
  if _HOST.value is not None:
    cfg.host = _HOST.value
  judges.run_server(judges.validate_server_config(cfg, "server"))


if __name__ == "__main__":
  cli.run(main)
