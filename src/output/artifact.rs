//! The file that keeps the full sanitized output when the agent's copy is cut.
//!
//! Text is held in memory until truncation is certain (the first over-long line or the
//! first elided line); then the file is created and everything so far, and everything
//! after, goes straight to it. Before that point the held text is at most the head, the
//! tail and one line, so memory stays bounded whatever the output size, and output that
//! is never cut leaves no file behind.
//!
//! A failure to create or write the file never fails the output: the file is removed (an
//! incomplete copy would be misleading) and the error is reported next to the text.
//!
//! The output may hold anything the cell printed, and artifactsDir may be in a shared
//! place, so the directory must be a real directory of ours that nobody else can write
//! (created 0700 when missing) and the file is created new (`O_EXCL | O_NOFOLLOW`, 0600):
//! a name planted by someone else, as a file or a symlink, is never written through.

use std::collections::hash_map::RandomState;
use std::fs::{File, OpenOptions};
use std::hash::{BuildHasher, Hasher};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::error::KernelError;
use crate::store::safe_fs::{check_rename_target, inspect_dir, Fault, Refusal};

/// Where to keep the full output when it is cut: `<dir>/<id>.txt`, where the id is the
/// caller's (see `artifact_ref`) or a new `output-<unix-millis>-<random>` (the directory
/// is created if needed); or a file the caller named by its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArtifactSink {
    place: Place,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Place {
    InDir {
        dir: PathBuf,
        id: Option<String>,
    },
    /// The exact file, checked with [`check_artifact_path`]; its directory must exist.
    File(PathBuf),
}

impl ArtifactSink {
    pub fn in_dir(dir: impl Into<PathBuf>) -> Self {
        ArtifactSink {
            place: Place::InDir {
                dir: dir.into(),
                id: None,
            },
        }
    }

    /// The artifact named `id`, already checked with
    /// [`check_artifact_id`](super::artifact_ref::check_artifact_id). A file of that
    /// name is replaced: the caller chose the name, as a retried call reuses it.
    pub fn named(dir: impl Into<PathBuf>, id: String) -> Self {
        ArtifactSink {
            place: Place::InDir {
                dir: dir.into(),
                id: Some(id),
            },
        }
    }

    /// The file at `path`, already checked with [`check_artifact_path`]. As with a named
    /// artifact, a regular file there is replaced (and made 0600).
    pub fn at_path(path: impl Into<PathBuf>) -> Self {
        ArtifactSink {
            place: Place::File(path.into()),
        }
    }

    /// The caller named the file by its path: it has no `artifact://` id, and the
    /// output names it by that path.
    pub fn is_path(&self) -> bool {
        matches!(self.place, Place::File(_))
    }
}

/// Why `path` cannot be the file a full output is written to, or `Ok`: it must be
/// absolute, name a file, hold no control character (the output names it on a line of
/// its own), and lie in an existing directory that is safe for private data (see
/// `store::safe_fs`: a real directory of ours that nobody else can write, never created
/// here); a symlink, a non-file or someone else's file at the path itself is refused.
pub fn check_artifact_path(path: &Path) -> Result<(), KernelError> {
    let invalid = |reason: String| KernelError::InvalidArgument {
        name: "artifactPath",
        reason,
    };
    let text = path.to_string_lossy();
    if !path.is_absolute() {
        return Err(invalid(format!("must be an absolute path, got {text:?}")));
    }
    if text.chars().any(char::is_control) {
        return Err(invalid(format!(
            "must not hold control characters, got {text:?}"
        )));
    }
    let parent = match (path.parent(), path.file_name()) {
        (Some(parent), Some(_)) if !text.ends_with('/') => parent,
        _ => {
            return Err(invalid(format!(
                "must name a file (a directory's path and a name), got {text:?}"
            )))
        }
    };
    let refusal = |what, fault| {
        KernelError::ArtifactsDir(Refusal {
            what,
            path: parent.to_path_buf(),
            fault,
        })
    };
    match inspect_dir(parent) {
        Ok(None) => {}
        Ok(Some(fault)) => return Err(refusal("artifactPath's directory", fault)),
        Err(e) => {
            return Err(refusal(
                "artifactPath's directory",
                Fault::Io(e.to_string()),
            ))
        }
    }
    check_rename_target("artifactPath", path)?;
    Ok(())
}

/// What became of the artifact once the output is finished.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct ArtifactOutcome {
    pub path: Option<PathBuf>,
    pub error: Option<String>,
}

pub(crate) enum ArtifactWriter {
    Disabled,
    Holding {
        sink: ArtifactSink,
        held: String,
    },
    Writing {
        path: PathBuf,
        file: BufWriter<File>,
    },
    Failed {
        error: String,
    },
}

impl ArtifactWriter {
    pub fn new(sink: Option<ArtifactSink>) -> Self {
        match sink {
            Some(sink) => ArtifactWriter::Holding {
                sink,
                held: String::new(),
            },
            None => ArtifactWriter::Disabled,
        }
    }

    pub fn write(&mut self, text: &str) {
        match self {
            ArtifactWriter::Holding { held, .. } => held.push_str(text),
            ArtifactWriter::Writing { path, file } => {
                if let Err(err) = file.write_all(text.as_bytes()) {
                    let error = write_error(path, &err);
                    self.fail(error);
                }
            }
            ArtifactWriter::Disabled | ArtifactWriter::Failed { .. } => {}
        }
    }

    /// Truncation is certain: create the file and move the held text into it.
    pub fn commit(&mut self) {
        let ArtifactWriter::Holding { sink, held } = self else {
            return;
        };
        let created = match &sink.place {
            Place::InDir { dir, id } => create_artifact_file(dir, id.as_deref()),
            Place::File(path) => create_file_at(path),
        };
        let next = match created {
            Ok((path, file)) => {
                let mut file = BufWriter::with_capacity(64 * 1024, file);
                match file.write_all(held.as_bytes()) {
                    Ok(()) => ArtifactWriter::Writing { path, file },
                    Err(err) => {
                        let error = write_error(&path, &err);
                        let _ = std::fs::remove_file(&path);
                        ArtifactWriter::Failed { error }
                    }
                }
            }
            Err(error) => ArtifactWriter::Failed { error },
        };
        *self = next;
    }

    pub fn finish(self) -> ArtifactOutcome {
        match self {
            ArtifactWriter::Disabled | ArtifactWriter::Holding { .. } => ArtifactOutcome::default(),
            ArtifactWriter::Writing { path, mut file } => match file.flush() {
                Ok(()) => ArtifactOutcome {
                    path: Some(path),
                    error: None,
                },
                Err(err) => {
                    let error = write_error(&path, &err);
                    let _ = std::fs::remove_file(&path);
                    ArtifactOutcome {
                        path: None,
                        error: Some(error),
                    }
                }
            },
            ArtifactWriter::Failed { error } => ArtifactOutcome {
                path: None,
                error: Some(error),
            },
        }
    }

    fn fail(&mut self, error: String) {
        if let ArtifactWriter::Writing { path, .. } = self {
            let path = std::mem::take(path);
            // Drop the handle before removing the incomplete file.
            *self = ArtifactWriter::Failed { error };
            let _ = std::fs::remove_file(path);
        }
    }
}

fn write_error(path: &Path, err: &io::Error) -> String {
    format!(
        "could not write the output artifact {}: {err}; it was removed",
        path.display()
    )
}

/// A new private file in `dir` (named `<id>.txt` when the caller named it), or why none
/// could be made (the message the report shows).
fn create_artifact_file(dir: &Path, id: Option<&str>) -> Result<(PathBuf, File), String> {
    crate::store::safe_fs::ensure_private_dir("artifactsDir", dir)
        .map_err(|refusal| format!("could not create an output artifact: {refusal}"))?;
    let opened = match id {
        Some(id) => open_named_file(dir, id),
        None => open_new_file(dir),
    };
    opened.map_err(|err| {
        format!(
            "could not create an output artifact in {}: {err}",
            dir.display()
        )
    })
}

/// The file at `path` (checked when the caller gave it), checked again now: its
/// directory may have changed since, and the file is checked on the descriptor opened,
/// before anything is written or emptied (see `safe_fs::replace_file_at`). A regular
/// file of ours with one link there is replaced and made 0600; a symlink is never
/// followed, a hard link, FIFO or device never written to.
fn create_file_at(path: &Path) -> Result<(PathBuf, File), String> {
    use crate::store::safe_fs::{open_private_dir, replace_file_at};
    use std::os::fd::AsFd;
    let dir = path.parent().unwrap_or(Path::new("/"));
    let refused = |what, path: &Path, fault| {
        let refusal = Refusal {
            what,
            path: path.to_path_buf(),
            fault,
        };
        format!("could not create an output artifact: {refusal}")
    };
    let dir_fd =
        open_private_dir(dir).map_err(|fault| refused("artifactPath's directory", dir, fault))?;
    let Some(name) = path.file_name() else {
        return Err(refused(
            "artifactPath",
            path,
            Fault::Io("it names no file".into()),
        ));
    };
    let file = replace_file_at(dir_fd.as_fd(), name)
        .map_err(|fault| refused("artifactPath", path, fault))?;
    Ok((path.to_path_buf(), file))
}

/// `<dir>/<id>.txt`, replacing a regular file of ours with one link of that name, checked
/// on the descriptor opened before it is emptied, in the directory opened and checked
/// again (as an `artifactPath` is: a symlink, hard link or FIFO planted under the name is
/// never followed, emptied or waited on).
fn open_named_file(dir: &Path, id: &str) -> io::Result<(PathBuf, File)> {
    use crate::store::safe_fs::{open_private_dir, replace_file_at};
    use std::os::fd::AsFd;
    let path = super::artifact_ref::artifact_path(dir, id);
    let fault = |fault: Fault| io::Error::other(format!("{} {fault}", path.display()));
    let dir_fd = open_private_dir(dir).map_err(fault)?;
    let name = path
        .file_name()
        .ok_or_else(|| io::Error::other("the artifact id names no file"))?;
    let file = replace_file_at(dir_fd.as_fd(), name).map_err(fault)?;
    Ok((path, file))
}

fn open_new_file(dir: &Path) -> io::Result<(PathBuf, File)> {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    open_first_free(dir, || format!("output-{millis}-{:016x}.txt", random_u64()))
}

/// A new private file `<dir>/<prefix>-<unix-millis>-<random>.<extension>` (the original
/// of an image sized for the model), in a directory checked as the output's is.
pub(crate) fn create_private_file(
    dir: &Path,
    prefix: &str,
    extension: &str,
) -> Result<(PathBuf, File), String> {
    crate::store::safe_fs::ensure_private_dir("artifactsDir", dir)
        .map_err(|refusal| format!("could not keep the original: {refusal}"))?;
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    open_first_free(dir, || {
        format!("{prefix}-{millis}-{:016x}.{extension}", random_u64())
    })
    .map_err(|err| format!("could not keep the original in {}: {err}", dir.display()))
}

/// The first of up to 8 names from `names` that is free in `dir`, created new. Only a
/// name that is taken is worth another try; any other error is final.
fn open_first_free(dir: &Path, mut names: impl FnMut() -> String) -> io::Result<(PathBuf, File)> {
    let mut last_err = None;
    for _ in 0..8 {
        let path = dir.join(names());
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        match crate::store::safe_fs::open_nofollow(&path, &mut options) {
            Ok(file) => return Ok((path, file)),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => last_err = Some(err),
            Err(err) => return Err(err),
        }
    }
    Err(last_err.unwrap_or_else(|| io::Error::other("no free artifact name")))
}

/// A name suffix, not a secret: `RandomState` is randomly keyed per process, and the
/// counter makes two calls in one millisecond differ.
fn random_u64() -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uncommitted_text_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = ArtifactWriter::new(Some(ArtifactSink::in_dir(dir.path())));
        writer.write("hello");
        assert_eq!(writer.finish(), ArtifactOutcome::default());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn committed_text_is_complete_and_private() {
        let dir = tempfile::tempdir().unwrap();
        let sink = ArtifactSink::in_dir(dir.path().join("nested"));
        let mut writer = ArtifactWriter::new(Some(sink));
        writer.write("before ");
        writer.commit();
        writer.write("after");
        let outcome = writer.finish();
        let path = outcome.path.unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "before after");
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(
            name.starts_with("output-") && name.ends_with(".txt"),
            "{name}"
        );
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
    }

    #[test]
    fn two_artifacts_get_distinct_names() {
        let dir = tempfile::tempdir().unwrap();
        let (a, _) = create_artifact_file(dir.path(), None).unwrap();
        let (b, _) = create_artifact_file(dir.path(), None).unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn many_artifacts_in_one_millisecond_get_distinct_names() {
        let dir = tempfile::tempdir().unwrap();
        let mut names = std::collections::HashSet::new();
        for _ in 0..200 {
            let (path, _) = create_artifact_file(dir.path(), None).unwrap();
            assert!(names.insert(path), "a name was given twice");
        }
    }

    #[test]
    fn a_taken_name_is_skipped_and_any_other_error_is_final() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("taken.txt"), "someone else's").unwrap();
        let mut tried = Vec::new();
        let mut names = ["taken.txt", "free.txt"].into_iter();
        let (path, _) = open_first_free(dir.path(), || {
            let name = names.next().unwrap().to_string();
            tried.push(name.clone());
            name
        })
        .unwrap();
        assert_eq!(path, dir.path().join("free.txt"));
        assert_eq!(tried, ["taken.txt", "free.txt"]);
        assert_eq!(
            std::fs::read_to_string(dir.path().join("taken.txt")).unwrap(),
            "someone else's"
        );

        // How a run offering only `name` fails, and how many names it asked for.
        let failing = |dir: &Path, name: &str| {
            let mut calls = 0;
            let err = open_first_free(dir, || {
                calls += 1;
                name.into()
            })
            .unwrap_err();
            (err.kind(), calls)
        };
        assert_eq!(
            failing(dir.path(), "taken.txt"),
            (io::ErrorKind::AlreadyExists, 8)
        );
        assert_eq!(
            failing(&dir.path().join("missing"), "x.txt"),
            (io::ErrorKind::NotFound, 1),
            "not retried"
        );
    }

    #[test]
    fn a_write_that_fails_removes_the_file_and_reports_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("artifact.txt");
        std::fs::write(&path, "").unwrap();
        // A handle that cannot write: the first buffer flushed fails.
        let file = BufWriter::with_capacity(16, File::open(&path).unwrap());
        let mut writer = ArtifactWriter::Writing {
            path: path.clone(),
            file,
        };
        writer.write("more than sixteen bytes of output");
        assert!(!path.exists(), "the incomplete copy is removed");
        writer.write("later text is dropped");
        let outcome = writer.finish();
        assert_eq!(outcome.path, None);
        let error = outcome.error.unwrap();
        assert!(
            error.starts_with(&format!(
                "could not write the output artifact {}: ",
                path.display()
            )) && error.ends_with("; it was removed"),
            "{error}"
        );
    }

    #[test]
    fn an_exact_path_gets_the_text_replacing_a_file_never_following_a_link() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("call.log");
        std::fs::write(&path, "old and longer than the new text").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        check_artifact_path(&path).unwrap();
        let mut writer = ArtifactWriter::new(Some(ArtifactSink::at_path(&path)));
        writer.write("new ");
        writer.commit();
        writer.write("text");
        assert_eq!(writer.finish().path.as_deref(), Some(path.as_path()));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new text");
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);

        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let link = dir.path().join("link.log");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let refused = check_artifact_path(&link).unwrap_err().to_string();
        assert!(refused.contains("is a symbolic link"), "{refused}");
        let mut writer = ArtifactWriter::new(Some(ArtifactSink::at_path(&link)));
        writer.write("secret");
        writer.commit();
        let outcome = writer.finish();
        assert_eq!(outcome.path, None);
        assert!(outcome.error.unwrap().contains("is a symbolic link"));
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    }

    /// A hard link planted at the path after the check, to a file of ours elsewhere: the
    /// write is refused before anything is emptied, and the other file keeps its text.
    #[test]
    fn a_hard_link_planted_at_an_exact_path_is_refused_and_its_target_kept() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("call.log");
        check_artifact_path(&path).unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::fs::hard_link(&victim, &path).unwrap();
        let mut writer = ArtifactWriter::new(Some(ArtifactSink::at_path(&path)));
        writer.write("secret");
        writer.commit();
        writer.write(" more");
        let outcome = writer.finish();
        assert_eq!(outcome.path, None);
        let error = outcome.error.unwrap();
        assert_eq!(
            error,
            format!(
                "could not create an output artifact: artifactPath {} has 2 hard links (another name may be a file of ours elsewhere, which writing here would change): remove it or choose another artifactPath",
                path.display()
            )
        );
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    }

    /// The same for a named artifact (`artifactId`) in `artifactsDir`: a hard link planted
    /// under its name keeps its target.
    #[test]
    fn a_hard_link_planted_under_an_artifact_id_is_refused_and_its_target_kept() {
        let dir = tempfile::tempdir().unwrap();
        let private = dir.path().join("artifacts");
        std::fs::create_dir(&private).unwrap();
        std::fs::set_permissions(
            &private,
            std::os::unix::fs::PermissionsExt::from_mode(0o700),
        )
        .unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        std::fs::hard_link(&victim, private.join("call-1.txt")).unwrap();
        let mut writer =
            ArtifactWriter::new(Some(ArtifactSink::named(&private, "call-1".to_string())));
        writer.write("secret");
        writer.commit();
        let outcome = writer.finish();
        assert_eq!(outcome.path, None);
        let error = outcome.error.unwrap();
        assert!(error.contains("has 2 hard links"), "{error}");
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        // A file of ours alone under that name is replaced, as before.
        std::fs::remove_file(private.join("call-1.txt")).unwrap();
        std::fs::write(private.join("call-1.txt"), "old text that is longer").unwrap();
        let mut writer =
            ArtifactWriter::new(Some(ArtifactSink::named(&private, "call-1".to_string())));
        writer.write("new");
        writer.commit();
        let outcome = writer.finish();
        assert_eq!(outcome.path, Some(private.join("call-1.txt")));
        assert_eq!(
            std::fs::read_to_string(private.join("call-1.txt")).unwrap(),
            "new"
        );
    }

    /// A FIFO planted at the path, with no reader and with one: the write neither waits
    /// nor writes into it.
    #[test]
    fn a_fifo_planted_at_an_exact_path_is_refused_without_waiting() {
        use std::os::unix::fs::OpenOptionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("call.log");
        check_artifact_path(&path).unwrap();
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let refuse = || {
            let mut writer = ArtifactWriter::new(Some(ArtifactSink::at_path(&path)));
            writer.write("secret");
            writer.commit();
            writer.finish()
        };
        let outcome = refuse();
        assert_eq!(outcome.path, None);
        let expected = format!(
            "could not create an output artifact: artifactPath {} exists and is not a regular file: remove it or choose another artifactPath",
            path.display()
        );
        assert_eq!(outcome.error.as_deref(), Some(expected.as_str()));
        // With a reader waiting on it, the open succeeds and the check refuses it.
        let reader = OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_NONBLOCK)
            .open(&path)
            .unwrap();
        let outcome = refuse();
        assert_eq!(outcome.error.as_deref(), Some(expected.as_str()));
        let mut got = Vec::new();
        let _ = io::Read::read_to_end(&mut &reader, &mut got);
        assert!(got.is_empty(), "nothing was written into the FIFO");
    }

    #[test]
    fn an_exact_path_must_be_absolute_and_in_a_private_directory_that_exists() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let loose = dir.path().join("loose");
        std::fs::create_dir(&loose).unwrap();
        std::fs::set_permissions(&loose, std::fs::Permissions::from_mode(0o777)).unwrap();
        let cases = [
            (PathBuf::from("rel.txt"), "ERR_INVALID_ARG", "absolute"),
            (dir.path().join("x\u{1b}.txt"), "ERR_INVALID_ARG", "control"),
            (PathBuf::from("/"), "ERR_INVALID_ARG", "must name a file"),
            (
                dir.path().join("missing/x.txt"),
                "ERR_ARTIFACTS_DIR",
                "cannot be used",
            ),
            (
                loose.join("x.txt"),
                "ERR_ARTIFACTS_DIR",
                "writable by group or others",
            ),
            (loose.clone(), "ERR_ARTIFACTS_DIR", "not a regular file"),
        ];
        for (path, code, why) in cases {
            let err = check_artifact_path(&path).unwrap_err();
            assert_eq!(err.code(), code, "{}: {err}", path.display());
            assert!(err.to_string().contains(why), "{err}");
        }
        // Made loose after the check: the write refuses it.
        let later = dir.path().join("later");
        std::fs::create_dir(&later).unwrap();
        std::fs::set_permissions(&later, std::fs::Permissions::from_mode(0o700)).unwrap();
        check_artifact_path(&later.join("x.txt")).unwrap();
        std::fs::set_permissions(&later, std::fs::Permissions::from_mode(0o777)).unwrap();
        let mut writer = ArtifactWriter::new(Some(ArtifactSink::at_path(later.join("x.txt"))));
        writer.commit();
        let error = writer.finish().error.unwrap();
        assert!(
            error.contains("artifactPath's directory") && error.contains("writable"),
            "{error}"
        );
        assert_eq!(std::fs::read_dir(&later).unwrap().count(), 0);
    }

    #[test]
    fn unusable_directory_is_reported_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let blocker = dir.path().join("file");
        std::fs::write(&blocker, "x").unwrap();
        let mut writer = ArtifactWriter::new(Some(ArtifactSink::in_dir(blocker.join("sub"))));
        writer.write("text");
        writer.commit();
        let outcome = writer.finish();
        assert_eq!(outcome.path, None);
        let error = outcome.error.unwrap();
        assert!(
            error.starts_with("could not create an output artifact: artifactsDir "),
            "{error}"
        );
    }

    #[test]
    fn a_loose_or_symlinked_directory_is_refused_with_the_reason() {
        use std::os::unix::fs::PermissionsExt;
        let base = tempfile::tempdir().unwrap();
        let attacker = base.path().join("attacker");
        std::fs::create_dir(&attacker).unwrap();
        std::fs::set_permissions(&attacker, std::fs::Permissions::from_mode(0o777)).unwrap();
        let link = base.path().join("artifacts");
        std::os::unix::fs::symlink(&attacker, &link).unwrap();
        for (dir, why) in [
            (&link, "is a symbolic link"),
            (&attacker, "is writable by group or others"),
        ] {
            let mut writer = ArtifactWriter::new(Some(ArtifactSink::in_dir(dir)));
            writer.write("secret output");
            writer.commit();
            let outcome = writer.finish();
            assert_eq!(outcome.path, None);
            let error = outcome.error.unwrap();
            assert!(error.contains(why), "{error}");
        }
        assert_eq!(std::fs::read_dir(&attacker).unwrap().count(), 0);
    }
}
