//! The `KvStore` class: the session key-value store, as JavaScript sees it.

use std::path::PathBuf;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use super::coded_error;
use crate::store::kv::{self, KvError};

#[napi(object)]
pub struct KvStoreOptions {
    /// Names the file (`pykernel_<sha256>.json` for `PYKERNEL_`). @default "PYKERNEL_"
    pub env_prefix: Option<String>,
}

/// A session's key-value store, shared with `kv` in the kernel.
#[napi(js_name = "KvStore")]
pub struct JsKvStore {
    inner: kv::KvStore,
}

fn thrown(env: &Env, err: KvError) -> Error {
    coded_error(env, err.code(), &err.to_string())
}

#[napi]
impl JsKvStore {
    /// Throws `ERR_ARTIFACTS_DIR` when `artifactsDir` (or its `kernel-store/`) is a
    /// symlink, not ours, or writable by group or others; a missing one is created 0700.
    #[napi(constructor)]
    pub fn new(
        env: Env,
        artifacts_dir: String,
        session_id: String,
        options: Option<KvStoreOptions>,
    ) -> Result<Self> {
        let prefix = super::options::env_prefix(options.and_then(|o| o.env_prefix))
            .map_err(|err| super::js_error(&env, &err))?;
        let inner = kv::KvStore::open(
            &PathBuf::from(artifacts_dir),
            &kv::file_prefix(&prefix),
            &session_id,
        )
        .map_err(|e| thrown(&env, e))?;
        Ok(Self { inner })
    }

    /// The store's file.
    #[napi(getter)]
    pub fn path(&self) -> String {
        self.inner.path().display().to_string()
    }

    /// The value, or undefined.
    #[napi(ts_return_type = "unknown")]
    pub fn get(&self, env: Env, key: String) -> Result<Either<Value, Undefined>> {
        match self.inner.get(&key) {
            Ok(Some(value)) => Ok(Either::A(value)),
            Ok(None) => Ok(Either::B(())),
            Err(e) => Err(thrown(&env, e)),
        }
    }

    /// Stores a JSON value (at most 256 KiB encoded; the store at most 4 MiB).
    #[napi]
    pub fn set(
        &self,
        env: Env,
        key: String,
        #[napi(ts_arg_type = "unknown")] value: Value,
    ) -> Result<()> {
        self.inner.set(&key, value).map_err(|e| thrown(&env, e))
    }

    /// Whether the key was there.
    #[napi]
    pub fn delete(&self, env: Env, key: String) -> Result<bool> {
        self.inner.delete(&key).map_err(|e| thrown(&env, e))
    }

    /// The keys, sorted.
    #[napi]
    pub fn list(&self, env: Env) -> Result<Vec<String>> {
        self.inner.list().map_err(|e| thrown(&env, e))
    }
}
