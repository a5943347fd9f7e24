//! Everything a local kernel is started from, decided and made before its process
//! exists: the interpreter, the runner's files and their bytecode, the filtered
//! environment, the private tmp and the sandbox plan. Spawning and forking take it
//! (`spawn.rs`); none of it depends on how the process will be made.

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use super::config::KernelConfig;
use crate::error::{KernelError, Result};
use crate::sandbox::egress_proxy;
use crate::sandbox::{Isolation, Network, Plan, Target};
use crate::start::bytecode::Bundle;
use crate::start::env::EnvFilter;
use crate::start::host_dir::{HostDir, PRIVATE_TMP};
use crate::start::python::{self, ResolveOptions, Resolved};
use crate::start::runner_files::{self, RunnerFiles};
use crate::start::session_dir::SessionDir;

/// A local kernel, ready to be spawned or forked.
pub(super) struct Prepared {
    pub(super) resolved: Resolved,
    pub(super) files: RunnerFiles,
    /// The host environment the kernel's was filtered from (the pids cgroup reads it).
    pub(super) base_env: HashMap<String, String>,
    /// The kernel's variables: filtered, the interpreter's, the host-managed ones.
    pub(super) env: BTreeMap<String, String>,
    /// Every frame goes to stderr (`<PREFIX>PYTHON_IPC_TRACE=1`).
    pub(super) trace: bool,
    /// The runner's precompiled bytecode, handed to the process as an fd.
    pub(super) bytecode: Option<Arc<Bundle>>,
    /// Removed once the kernel is reaped.
    pub(super) private_tmp: Option<HostDir>,
    /// Its session's directory (a new one for a kernel that has no session).
    pub(super) session_dir: Option<Arc<SessionDir>>,
    pub(super) sandbox: Plan,
    pub(super) isolation: Isolation,
}

/// The interpreter `config` would run.
pub(super) async fn resolve(config: &KernelConfig) -> Result<Resolved> {
    let resolve_opts = ResolveOptions {
        cwd: config.cwd.clone(),
        interpreter: config.interpreter.clone(),
        base_env: config.base_env_or_host(),
        env_prefix: config.env_prefix.clone(),
        sandboxed: !config.sandbox.is_off(),
    };
    tokio::task::spawn_blocking(move || python::resolve(&resolve_opts).map(|(r, _)| r))
        .await
        .map_err(|e| KernelError::io("resolving Python", std::io::Error::other(e)))?
}

/// Prepares a local kernel for `config`: most of a kernel's start-up is here.
pub(super) async fn prepare(config: &KernelConfig) -> Result<Prepared> {
    python::check_cwd(&config.cwd)?;
    let base_env = config.base_env_or_host();
    let resolved = resolve(config).await?;
    let runner_dir = config
        .runner_dir
        .clone()
        .unwrap_or_else(runner_files::default_base_dir);
    let files = tokio::task::spawn_blocking(move || runner_files::materialize(&runner_dir))
        .await
        .map_err(|e| KernelError::io("writing the runner", std::io::Error::other(e)))??;

    let mut env = EnvFilter::new(&config.env_prefix).filter(&base_env);
    python::apply_to_env(&resolved, &mut env);
    env.extend(config.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    // Only the host makes a zygote (a runner given this would wait for fork requests).
    env.remove("PYKERNEL_ZYGOTE");
    if config.memory_limit_bytes.is_some() {
        // RLIMIT_AS counts address space, and glibc reserves a 64 MiB malloc arena per
        // thread: an idle kernel would take ~300 MiB of the limit before a cell runs.
        env.entry("MALLOC_ARENA_MAX".into())
            .or_insert_with(|| "2".into());
    }
    if let Some(Network::Allow(_)) = config.sandbox.policy().map(|p| &p.network) {
        // The kernel's only way out: its proxy, in its own network namespace. The host's
        // exceptions would send requests around it (to the kernel's own loopback, where
        // nothing answers for the host's `localhost`).
        let proxy = format!("http://127.0.0.1:{}", egress_proxy::KERNEL_PORT);
        for key in [
            "HTTP_PROXY",
            "HTTPS_PROXY",
            "ALL_PROXY",
            "http_proxy",
            "https_proxy",
            "all_proxy",
        ] {
            env.insert(key.into(), proxy.clone());
        }
        for key in ["NO_PROXY", "no_proxy"] {
            env.remove(key);
        }
    }
    check_variables(&env, config)?;
    let trace = ipc_trace(&base_env, config);

    let bytecode = crate::start::bytecode::for_interpreter(
        &resolved.path,
        &files,
        &env,
        &config.sandbox,
        config.startup_timeout,
    );
    if let Some(bundle) = &bytecode {
        env.insert(
            crate::start::bytecode::ENV_VAR.into(),
            format!("fd:{}", bundle.fd()),
        );
    }
    let environment = environment_of(&resolved);
    let homes = homes(&env);
    let overlay = config.sandbox.session_installs() && crate::sandbox::support().overlay.is_ok();
    // The private tmp and the session's directory are made side by side: each is a trip
    // to the blocking pool and a few directories made, on every sandboxed start.
    let private_tmp = async {
        if config.sandbox.is_off() {
            return Ok(None);
        }
        let made = tokio::task::spawn_blocking(|| HostDir::create(PRIVATE_TMP))
            .await
            .map_err(|e| {
                KernelError::io("making the kernel's private tmp", std::io::Error::other(e))
            })?
            .map_err(|e| KernelError::io("making the kernel's private tmp", e))?;
        Ok::<_, KernelError>(Some(made))
    };
    let session_dir = async {
        match &config.session_dir {
            _ if !(overlay || config.sandbox.confines_writes()) => Ok::<_, KernelError>(None),
            Some(dir) => Ok(Some(dir.clone())),
            None => {
                let (environment, homes) = (environment.clone(), homes.clone());
                let made = tokio::task::spawn_blocking(move || {
                    SessionDir::create(environment.as_deref(), &homes)
                })
                .await
                .map_err(|e| {
                    KernelError::io("making the session's directory", std::io::Error::other(e))
                })?
                .map_err(|e| KernelError::io("making the session's directory", e))?;
                Ok(Some(Arc::new(made)))
            }
        }
    };
    let (private_tmp, session_dir) = tokio::join!(private_tmp, session_dir);
    let (private_tmp, session_dir) = (private_tmp?, session_dir?);
    if let (Some(dir), true) = (&session_dir, config.sandbox.confines_writes()) {
        // The home directory's caches are read-only to the kernel: matplotlib would warn
        // and rebuild its font list in a temporary directory at every import, pip would
        // warn and cache nothing.
        for (key, sub) in [("MPLCONFIGDIR", "matplotlib"), ("PIP_CACHE_DIR", "pip")] {
            env.entry(key.into())
                .or_insert_with(|| dir.cache().join(sub).display().to_string());
        }
        // Where the home directory has no cache to read from (a fresh machine, CI), every
        // tool's cache goes to the session's too (fontconfig's, which matplotlib's first
        // plot asks for, would complain that no cache is writable).
        let home_cache = env
            .get("HOME")
            .map(|h| std::path::Path::new(h).join(".cache"));
        if home_cache.is_some_and(|c| !c.exists()) {
            env.entry("XDG_CACHE_HOME".into())
                .or_insert_with(|| dir.cache().join("xdg").display().to_string());
        }
    }
    let (sandbox, isolation) = {
        let target = Target {
            runner_base: Some(&files.base),
            private_tmp: private_tmp.as_ref().map(|d| d.path()),
            keep: kept_for_kernel(&resolved, &env),
            hide: config.artifacts_dir.iter().cloned().collect(),
            memory_limit_bytes: config.memory_limit_bytes,
            homes,
            environment,
            installs: session_dir.as_ref().filter(|_| overlay).map(|d| d.layers()),
            writable: session_dir
                .iter()
                .map(|d| d.cache().to_path_buf())
                .collect(),
            ..Target::new(&config.cwd)
        };
        Plan::prepare(&config.sandbox, &target)?
    };
    if let Some(tmp) = &private_tmp {
        let inside = sandbox.tmp_inside(tmp.path()).display().to_string();
        for key in ["TMPDIR", "TMP", "TEMP"] {
            env.insert(key.into(), inside.clone());
        }
    }
    Ok(Prepared {
        resolved,
        files,
        base_env,
        env,
        trace,
        bytecode,
        private_tmp,
        session_dir,
        sandbox,
        isolation,
    })
}

/// The interpreter's environment, where it installs: a venv's root, else the prefix its
/// `bin/python` lies in (its standard library and `site-packages` with it).
pub(super) fn environment_of(resolved: &Resolved) -> Option<PathBuf> {
    let root = match &resolved.venv {
        Some(venv) => venv.clone(),
        None => resolved.path.parent()?.parent()?.to_path_buf(),
    };
    std::fs::canonicalize(root)
        .ok()
        .filter(|p| p != std::path::Path::new("/"))
}

/// The home directories whose credential stores a kernel must not read: the one its
/// `HOME` names and the account's own, where they differ.
pub(super) fn homes(env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    let mut homes: Vec<PathBuf> = env
        .get("HOME")
        .map(PathBuf::from)
        .filter(|h| h.is_absolute())
        .into_iter()
        .collect();
    #[cfg(unix)]
    if let Ok(Some(user)) = nix::unistd::User::from_uid(nix::unistd::getuid()) {
        homes.push(user.dir);
    }
    let mut real: Vec<PathBuf> = homes
        .into_iter()
        .filter(|h| h != std::path::Path::new("/"))
        .map(|h| std::fs::canonicalize(&h).unwrap_or(h))
        .collect();
    real.sort();
    real.dedup();
    real
}

/// `<PREFIX>PYTHON_IPC_TRACE=1` in the host's environment: every frame goes to stderr.
pub(super) fn ipc_trace(base_env: &HashMap<String, String>, config: &KernelConfig) -> bool {
    base_env
        .get(&format!("{}PYTHON_IPC_TRACE", config.env_prefix))
        .is_some_and(|v| v == "1")
}

/// Host directories a kernel needs where they are, whatever its view covers: its
/// interpreter's installation (a venv made under /tmp) and its `PYTHONPATH`.
pub(super) fn kept_for_kernel(resolved: &Resolved, env: &BTreeMap<String, String>) -> Vec<PathBuf> {
    let mut keep: Vec<PathBuf> = resolved.venv.iter().cloned().collect();
    // <prefix>/bin/python: the prefix holds its standard library.
    keep.extend(
        resolved
            .path
            .parent()
            .and_then(|bin| bin.parent())
            .map(PathBuf::from),
    );
    if let Some(path) = env.get("PYTHONPATH") {
        keep.extend(std::env::split_paths(path).filter(|p| p.is_absolute()));
    }
    keep.retain(|p| p.is_absolute() && p != std::path::Path::new("/"));
    keep
}

/// Refuses a variable no process can be given.
pub(super) fn check_variables(env: &BTreeMap<String, String>, config: &KernelConfig) -> Result<()> {
    let bad = |k: &String, v: &String| k.is_empty() || k.contains(['=', '\0']) || v.contains('\0');
    let found = env.iter().chain(&config.env).find(|(k, v)| bad(k, v));
    match found {
        Some((key, _)) => Err(KernelError::InvalidArgument {
            name: if config.env.contains_key(key) { "env" } else { "baseEnv" },
            reason: format!(
                "variable '{}' cannot be given to a process: a name must be non-empty, without '=' or NUL; a value without NUL",
                key.replace('\0', "\\0")
            ),
        }),
        None => Ok(()),
    }
}
