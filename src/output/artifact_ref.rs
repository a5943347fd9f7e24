//! Naming a full output: artifact ids, `artifact://<id>` references, and reading one back.
//!
//! An id names the file `<artifactsDir>/<id>.txt`, so an id is checked before it touches
//! the file system: 1 to 128 characters of `A-Z a-z 0-9 . _ -`, not starting with `.`.
//! No separator, no `..` component and no hidden file can then be named, whatever the
//! caller (or code in the kernel, through `read()`) passes.
//!
//! A reference may select lines as `read()` does: `artifact://<id>:<first>-<last>`
//! (1-based, inclusive) or `artifact://<id>:<first>-` (to the end).

use std::io::{self, BufRead, BufReader, Read};
use std::path::{Path, PathBuf};

use crate::error::KernelError;

pub const ARTIFACT_SCHEME: &str = "artifact://";

const MAX_ID_CHARS: usize = 128;

/// Why `id` cannot name an artifact, or `Ok`.
pub fn check_artifact_id(id: &str) -> Result<(), String> {
    let allowed = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if id.is_empty() || id.len() > MAX_ID_CHARS {
        return Err(format!(
            "must be 1 to {MAX_ID_CHARS} characters, got {}",
            id.len()
        ));
    }
    if id.starts_with('.') || !id.chars().all(allowed) {
        return Err(format!(
            "must be letters, digits, '.', '_' or '-', not starting with '.', got {id:?}"
        ));
    }
    Ok(())
}

/// The file of artifact `id` in `dir` (the id already checked).
pub fn artifact_path(dir: &Path, id: &str) -> PathBuf {
    dir.join(format!("{id}.txt"))
}

/// The reference the agent reads for artifact `id`.
pub fn artifact_uri(id: &str) -> String {
    format!("{ARTIFACT_SCHEME}{id}")
}

/// A parsed `artifact://` reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactRef {
    pub id: String,
    /// 1-based first line and inclusive last line (`None`: to the end).
    pub lines: Option<(u64, Option<u64>)>,
}

fn invalid(reason: String) -> KernelError {
    KernelError::InvalidArgument {
        name: "uri",
        reason,
    }
}

/// Parses `artifact://<id>[:<first>-[<last>]]`.
pub fn parse_artifact_uri(uri: &str) -> Result<ArtifactRef, KernelError> {
    let Some(rest) = uri.strip_prefix(ARTIFACT_SCHEME) else {
        return Err(invalid(format!(
            "must start with {ARTIFACT_SCHEME}, got {uri:?}"
        )));
    };
    let (id, selector) = match rest.split_once(':') {
        Some((id, selector)) => (id, Some(selector)),
        None => (rest, None),
    };
    check_artifact_id(id).map_err(|reason| invalid(format!("its id {reason}")))?;
    let lines = selector
        .map(|selector| {
            let bad = || {
                invalid(format!(
                    "its line range must be <first>-<last> or <first>- (1-based), got {selector:?}"
                ))
            };
            let (first, last) = selector.split_once('-').ok_or_else(bad)?;
            let first: u64 = first.parse().map_err(|_| bad())?;
            let last = match last {
                "" => None,
                last => Some(last.parse::<u64>().map_err(|_| bad())?),
            };
            if first == 0 || last.is_some_and(|last| last < first) {
                return Err(bad());
            }
            Ok((first, last))
        })
        .transpose()?;
    Ok(ArtifactRef {
        id: id.to_string(),
        lines,
    })
}

/// The reference of a bridge call `read` of an `artifact://` path (what the prelude's
/// `read()` sends), else `None`.
pub fn artifact_read_call(name: &str, args: &serde_json::Value) -> Option<String> {
    let path = args.get("path")?.as_str()?;
    (name == "read" && path.starts_with(ARTIFACT_SCHEME)).then(|| path.to_string())
}

/// The text of the artifact `uri` names in `dir` (its selected lines, each with its `\n`).
pub fn read_artifact(dir: &Path, uri: &str) -> Result<String, KernelError> {
    let reference = parse_artifact_uri(uri)?;
    let path = artifact_path(dir, &reference.id);
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    let file = crate::safe_fs::open_nofollow(&path, &mut options).map_err(|err| {
        if err.kind() == io::ErrorKind::NotFound {
            KernelError::ArtifactNotFound {
                uri: uri.to_string(),
                path: path.clone(),
            }
        } else {
            KernelError::io(format!("reading {}", path.display()), err)
        }
    })?;
    let reading = |err| KernelError::io(format!("reading {}", path.display()), err);
    let mut reader = BufReader::new(file);
    let mut text = String::new();
    match reference.lines {
        None => {
            reader.read_to_string(&mut text).map_err(reading)?;
        }
        Some((first, last)) => {
            let mut line = String::new();
            let mut number = 0u64;
            loop {
                line.clear();
                if reader.read_line(&mut line).map_err(reading)? == 0 {
                    break;
                }
                number += 1;
                if last.is_some_and(|last| number > last) {
                    break;
                }
                if number >= first {
                    text.push_str(&line);
                }
            }
        }
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_that_could_leave_the_directory_are_refused() {
        for good in ["21", "output-1-abc", "call_7.v2", &"a".repeat(128)] {
            assert_eq!(check_artifact_id(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "..",
            ".hidden",
            "../x",
            "a/b",
            "/etc/passwd",
            "a\\b",
            "a\0b",
            "é",
            &"a".repeat(129),
        ] {
            assert!(check_artifact_id(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn references_parse_with_optional_line_ranges() {
        let parsed = |uri| parse_artifact_uri(uri).unwrap();
        assert_eq!(parsed("artifact://21").lines, None);
        assert_eq!(parsed("artifact://21:3-4").lines, Some((3, Some(4))));
        assert_eq!(parsed("artifact://21:3-").lines, Some((3, None)));
        for bad in [
            "file:///x",
            "artifact://",
            "artifact://../x",
            "artifact://a:0-1",
            "artifact://a:4-3",
            "artifact://a:x",
        ] {
            let err = parse_artifact_uri(bad).unwrap_err();
            assert_eq!(err.code(), "ERR_INVALID_ARG", "{bad}");
        }
    }

    #[test]
    fn reading_returns_the_text_or_its_lines() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(artifact_path(dir.path(), "a"), "1\n2\n3\n4").unwrap();
        assert_eq!(
            read_artifact(dir.path(), "artifact://a").unwrap(),
            "1\n2\n3\n4"
        );
        assert_eq!(
            read_artifact(dir.path(), "artifact://a:2-3").unwrap(),
            "2\n3\n"
        );
        assert_eq!(
            read_artifact(dir.path(), "artifact://a:3-").unwrap(),
            "3\n4"
        );
        let missing = read_artifact(dir.path(), "artifact://b").unwrap_err();
        assert_eq!(missing.code(), "ERR_ARTIFACT_NOT_FOUND");
    }
}
