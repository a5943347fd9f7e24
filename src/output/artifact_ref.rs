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

/// At most this much of an artifact is read back at once: a cell can ask for a file of
/// gigabytes (its own output, or one it planted), and the whole of it would be held by the
/// host and sent back in one frame. Past it the reply ends with a line saying how to read
/// on (a line range).
pub const MAX_READ_BYTES: usize = 4 << 20;

/// The text of the artifact `uri` names in `dir` (its selected lines, each with its `\n`),
/// at most [`MAX_READ_BYTES`] of it. `dir` must be private (ours, not writable by others,
/// not a symlink) and the artifact a regular file.
pub fn read_artifact(dir: &Path, uri: &str) -> Result<String, KernelError> {
    let reference = parse_artifact_uri(uri)?;
    if let Some(fault) = crate::store::safe_fs::inspect_dir(dir).ok().flatten() {
        return Err(KernelError::ArtifactsDir(crate::store::safe_fs::Refusal {
            what: "artifactsDir",
            path: dir.to_path_buf(),
            fault,
        }));
    }
    let path = artifact_path(dir, &reference.id);
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    let file =
        crate::store::safe_fs::open_regular_nofollow(&path, &mut options).map_err(|err| {
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
    let (first, last) = reference.lines.unwrap_or((1, None));
    // Lines before the range are skipped without being held.
    let mut number = 1u64;
    while number < first {
        if reader.skip_until(b'\n').map_err(reading)? == 0 {
            return Ok(String::new());
        }
        number += 1;
    }
    let mut bytes = Vec::new();
    loop {
        if last.is_some_and(|last| number > last) {
            break;
        }
        let room = (MAX_READ_BYTES - bytes.len()) as u64;
        let read = (&mut reader)
            .take(room)
            .read_until(b'\n', &mut bytes)
            .map_err(reading)?;
        if read == 0 {
            break;
        }
        if bytes.len() >= MAX_READ_BYTES {
            let line_ended = bytes.ends_with(b"\n");
            let mut text = String::from_utf8_lossy(&bytes).into_owned();
            if !line_ended {
                text.push('\n');
            }
            let next = if line_ended { number + 1 } else { number };
            text.push_str(&format!(
                "[… read stopped after {} MiB: read the rest with a line range, artifact://{}:{next}-]\n",
                MAX_READ_BYTES >> 20,
                reference.id
            ));
            return Ok(text);
        }
        number += 1;
    }
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
        assert_eq!(
            parsed("artifact://21:3-3").lines,
            Some((3, Some(3))),
            "one line"
        );
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

    #[test]
    fn a_fifo_is_refused_at_once_and_a_huge_artifact_is_read_in_bounded_pieces() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
        // A FIFO would block the open for ever.
        nix::unistd::mkfifo(&dir.path().join("f.txt"), nix::sys::stat::Mode::S_IRWXU).unwrap();
        let err = read_artifact(dir.path(), "artifact://f").unwrap_err();
        assert!(err.to_string().contains("not a regular file"), "{err}");

        // 5 MiB in one line, then two short lines: a read stops at the cap and says how to
        // go on; a range after the long line skips it without holding it.
        let mut big = "x".repeat(5 << 20);
        big.push_str("\nsecond\nthird\n");
        std::fs::write(dir.path().join("big.txt"), &big).unwrap();
        let text = read_artifact(dir.path(), "artifact://big").unwrap();
        assert!(text.len() < MAX_READ_BYTES + 200, "{}", text.len());
        assert!(
            text.ends_with("read the rest with a line range, artifact://big:1-]\n"),
            "{}",
            &text[text.len() - 120..]
        );
        assert_eq!(
            read_artifact(dir.path(), "artifact://big:2-").unwrap(),
            "second\nthird\n"
        );

        // A directory others can write is not read from.
        std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = read_artifact(dir.path(), "artifact://a").unwrap_err();
        assert!(matches!(err, KernelError::ArtifactsDir(_)), "{err}");
    }

    #[test]
    fn only_a_read_of_an_artifact_uri_is_answered_from_the_artifacts() {
        let call = |name, args| artifact_read_call(name, &args);
        assert_eq!(
            call("read", json!({"path": "artifact://out-1:2-3"})),
            Some("artifact://out-1:2-3".to_string())
        );
        assert_eq!(call("read", json!({"path": "/etc/passwd"})), None);
        assert_eq!(call("read", json!({"path": 7})), None);
        assert_eq!(call("read", json!({})), None);
        assert_eq!(call("write", json!({"path": "artifact://out-1"})), None);
    }

    #[test]
    fn a_capped_read_keeps_whole_lines_before_the_cap_and_names_the_line_to_go_on_from() {
        let dir = tempfile::tempdir().unwrap();
        let note = |next: u64| {
            format!("[… read stopped after 4 MiB: read the rest with a line range, artifact://a:{next}-]\n")
        };
        // Two lines of 3 MiB: the second is cut at the cap, ended with a newline here, and
        // read on from its own number.
        let line = format!("{}\n", "a".repeat((3 << 20) - 1));
        std::fs::write(artifact_path(dir.path(), "a"), line.repeat(2)).unwrap();
        let text = read_artifact(dir.path(), "artifact://a").unwrap();
        let expected = format!(
            "{line}{}\n{}",
            &line[..MAX_READ_BYTES - line.len()],
            note(2)
        );
        assert!(
            text == expected,
            "{} bytes, ends {:?}",
            text.len(),
            &text[text.len() - 100..]
        );

        // A line that ends exactly at the cap: nothing is added to it, and the next line
        // is where to go on.
        let line = format!("{}\n", "b".repeat(MAX_READ_BYTES - 1));
        std::fs::write(artifact_path(dir.path(), "a"), format!("{line}next\n")).unwrap();
        let text = read_artifact(dir.path(), "artifact://a").unwrap();
        let expected = format!("{line}{}", note(2));
        assert!(
            text == expected,
            "{} bytes, ends {:?}",
            text.len(),
            &text[text.len() - 100..]
        );
    }
}
