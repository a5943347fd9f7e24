//! What a host asks of the sandbox: `KernelOptions.sandbox`, read from JavaScript in
//! `napi/sandbox.rs`.

use std::path::PathBuf;

/// `KernelOptions.sandbox`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SandboxConfig {
    /// No isolation: for hosts that already run inside a sandbox.
    Off,
    On {
        /// `false`: no network but loopback.
        network: bool,
        /// `Some`: writes only beneath the kernel's cwd, its private `/tmp`, its own
        /// `/dev/shm` and ptys, and these directories. Reads stay allowed everywhere.
        writable: Option<Vec<PathBuf>>,
    },
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig::On {
            network: true,
            writable: None,
        }
    }
}

impl SandboxConfig {
    pub fn is_off(&self) -> bool {
        matches!(self, SandboxConfig::Off)
    }

    pub fn confines_writes(&self) -> bool {
        matches!(
            self,
            SandboxConfig::On {
                writable: Some(_),
                ..
            }
        )
    }
}
