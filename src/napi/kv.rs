//! The `KvStore` class: the session key-value store, as JavaScript sees it.

use std::path::PathBuf;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use super::args::{self, convert, convert_optional};
use super::signatures as sig;
use super::{coded_error, rejected};
use crate::store::kv::{self, KvError};

#[napi(object)]
pub struct KvStoreOptions {
    /// Names the file (`pykernel_<sha256>.json` for `PYKERNEL_`). @default "PYKERNEL_"
    pub env_prefix: Option<String>,
}

/// A session's key-value store, shared with `kv` in the kernel.
#[napi(js_name = "KvStore")]
pub struct JsKvStore {
    inner: Arc<kv::KvStore>,
}

fn thrown(env: &Env, err: KvError) -> Error {
    coded_error(env, err.code(), &err.to_string())
}

#[napi]
impl JsKvStore {
    /// Throws `ERR_ARTIFACTS_DIR` when `artifactsDir` (or its `kernel-store/`) is a
    /// symlink, not ours, or writable by group or others; a missing one is created 0700.
    #[napi(
        constructor,
        ts_args_type = "artifactsDir: string, sessionId: string, options?: KvStoreOptions | undefined | null"
    )]
    pub fn new(
        env: Env,
        artifacts_dir: Unknown,
        session_id: Unknown,
        options: Option<Unknown>,
    ) -> Result<Self> {
        let parsed = (|| {
            args::check(
                &env,
                sig::NEW_KV_STORE,
                &[Some(artifacts_dir), Some(session_id), options],
            )?;
            let options: Option<KvStoreOptions> = convert_optional("options", options)?;
            Ok::<_, crate::error::KernelError>((
                convert::<String>("artifactsDir", artifacts_dir)?,
                convert::<String>("sessionId", session_id)?,
                super::options::env_prefix(options.and_then(|o| o.env_prefix))?,
            ))
        })();
        let (artifacts_dir, session_id, prefix) =
            parsed.map_err(|err| super::js_error(&env, &err))?;
        let inner = kv::KvStore::open(
            &PathBuf::from(artifacts_dir),
            &kv::file_prefix(&prefix),
            &session_id,
        )
        .map_err(|e| thrown(&env, e))?;
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// The store's file.
    #[napi(getter)]
    pub fn path(&self) -> String {
        self.inner.path().display().to_string()
    }

    /// The value, or undefined.
    #[napi(ts_args_type = "key: string", ts_return_type = "Promise<unknown>")]
    pub fn get<'env>(
        &self,
        env: &'env Env,
        key: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, Either<Value, Undefined>>> {
        let key: String = match args::check(env, sig::KV_STORE_GET, &[Some(key)])
            .and_then(|()| convert("key", key))
        {
            Ok(key) => key,
            Err(err) => return rejected(env, err),
        };
        off_the_event_loop(env, &self.inner, move |store| {
            Ok(match store.get(&key)? {
                Some(value) => Either::A(value),
                None => Either::B(()),
            })
        })
    }

    /// Stores a JSON value (at most 256 KiB encoded; the store at most 4 MiB).
    #[napi(
        ts_args_type = "key: string, value: unknown",
        ts_return_type = "Promise<void>"
    )]
    pub fn set<'env>(
        &self,
        env: &'env Env,
        key: Unknown<'env>,
        value: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, ()>> {
        let parsed =
            args::check(env, sig::KV_STORE_SET, &[Some(key), Some(value)]).and_then(|()| {
                Ok((
                    convert::<String>("key", key)?,
                    convert::<Value>("value", value)?,
                ))
            });
        let (key, value) = match parsed {
            Ok(parsed) => parsed,
            Err(err) => return rejected(env, err),
        };
        off_the_event_loop(env, &self.inner, move |store| store.set(&key, value))
    }

    /// Whether the key was there.
    #[napi(ts_args_type = "key: string", ts_return_type = "Promise<boolean>")]
    pub fn delete<'env>(
        &self,
        env: &'env Env,
        key: Unknown<'env>,
    ) -> Result<PromiseRaw<'env, bool>> {
        let key: String = match args::check(env, sig::KV_STORE_DELETE, &[Some(key)])
            .and_then(|()| convert("key", key))
        {
            Ok(key) => key,
            Err(err) => return rejected(env, err),
        };
        off_the_event_loop(env, &self.inner, move |store| store.delete(&key))
    }

    /// The keys, sorted.
    #[napi(ts_return_type = "Promise<string[]>")]
    pub fn list<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, Vec<String>>> {
        off_the_event_loop(env, &self.inner, |store| store.list())
    }
}

/// Runs a store operation on a blocking thread: it may wait up to the lock's bound (2 s)
/// while a cell holds the lock, and the host's event loop must not wait with it.
fn off_the_event_loop<'env, T>(
    env: &'env Env,
    store: &Arc<kv::KvStore>,
    operation: impl FnOnce(&kv::KvStore) -> std::result::Result<T, KvError> + Send + 'static,
) -> Result<PromiseRaw<'env, T>>
where
    T: 'static + Send + ToNapiValue,
{
    let store = Arc::clone(store);
    env.spawn_future_with_callback(
        async move { Ok(tokio::task::spawn_blocking(move || operation(&store)).await) },
        |env, joined| match joined {
            Ok(done) => done.map_err(|e| thrown(env, e)),
            Err(panicked) => Err(super::js_error(
                env,
                &crate::error::KernelError::io("background task", std::io::Error::other(panicked)),
            )),
        },
    )
}
