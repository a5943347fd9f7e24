//! How a process ended, in the words a person would use: "exit code 1", "killed by
//! signal 9 (SIGKILL)".

use nix::sys::signal::Signal;

/// How the kernel process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(code), _) => write!(f, "exit code {code}"),
            (None, Some(sig)) => {
                let name = Signal::try_from(sig)
                    .map(|s| s.as_str())
                    .unwrap_or("unknown");
                write!(f, "killed by signal {sig} ({name})")
            }
            (None, None) => write!(f, "ended"),
        }
    }
}

impl From<std::process::ExitStatus> for ExitInfo {
    fn from(status: std::process::ExitStatus) -> Self {
        use std::os::unix::process::ExitStatusExt;
        ExitInfo {
            code: status.code(),
            signal: status.signal(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exit_info_reads_like_a_person_would_say_it() {
        let code = ExitInfo {
            code: Some(3),
            signal: None,
        };
        assert_eq!(code.to_string(), "exit code 3");
        let killed = ExitInfo {
            code: None,
            signal: Some(9),
        };
        assert_eq!(killed.to_string(), "killed by signal 9 (SIGKILL)");
    }
}
