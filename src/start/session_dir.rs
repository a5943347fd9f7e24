//! What a session keeps on the host for its kernels: what its cells installed into the
//! interpreter's environment, and the caches tools write, so that no other session (and
//! no later kernel of another session) ever runs or reads them.
//!
//! - `upper/` and `work/`: the kernel's filesystem view mounts an overlay over the
//!   environment (a venv's root, else the interpreter's prefix) with `upper` as its upper
//!   layer: pip, `uv pip` or a cell writing `site-packages` directly all write there,
//!   uninstalls and upgrades included (overlayfs records a removed file of the
//!   environment as a whiteout). Out of the kernel's sight but through the overlay.
//! - `cache/`: writable, where the kernel's matplotlib config and cache and pip's cache
//!   point (the home directory's are read-only to a default kernel). matplotlib's is
//!   seeded with the host user's own (its `matplotlibrc`, styles and font list), so the
//!   first plot does not rebuild the font list.
//!
//! Every kernel of the session uses the same directory, so what it installed and cached
//! survives a `reset` and a restart. The directory is the host's ([`HostDir`]: 0700,
//! named for the host, removed once the session and its kernels let go of it, at the
//! host's exit, or by a later host).

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::sandbox::InstallLayers;
use crate::start::host_dir::{HostDir, SESSION};

/// One session's directory.
#[derive(Debug)]
pub struct SessionDir {
    layers: InstallLayers,
    cache: PathBuf,
    /// Removes the directory when the last owner drops it.
    _dir: HostDir,
}

impl SessionDir {
    /// A new directory, with empty layers for an overlay of `environment` and a cache
    /// seeded from `homes` (the user's home directories).
    pub fn create(environment: Option<&Path>, homes: &[PathBuf]) -> io::Result<SessionDir> {
        let dir = HostDir::create(SESSION)?;
        let layers = InstallLayers {
            root: dir.path().to_path_buf(),
            upper: dir.path().join("upper"),
            work: dir.path().join("work"),
        };
        let cache = dir.path().join("cache");
        for made in [&layers.upper, &layers.work, &cache] {
            std::fs::create_dir(made)?;
        }
        // The overlay's root takes its mode from the upper layer's root.
        if let Some(meta) = environment.and_then(|e| std::fs::metadata(e).ok()) {
            let mode = meta.permissions().mode() & 0o7777;
            std::fs::set_permissions(&layers.upper, std::fs::Permissions::from_mode(mode))?;
        }
        seed_matplotlib(&cache.join("matplotlib"), homes);
        Ok(SessionDir {
            layers,
            cache,
            _dir: dir,
        })
    }

    pub fn layers(&self) -> &InstallLayers {
        &self.layers
    }

    /// Where the session's kernels keep their caches (matplotlib's, pip's).
    pub fn cache(&self) -> &Path {
        &self.cache
    }

    /// Nothing was installed or changed in the environment yet: a kernel started with
    /// another (empty) directory can serve the session as well.
    pub fn is_empty(&self) -> bool {
        std::fs::read_dir(&self.layers.upper).map_or(true, |mut entries| entries.next().is_none())
    }
}

/// Copies the user's matplotlib configuration and font cache into `dir`, which becomes
/// the kernel's `MPLCONFIGDIR` (matplotlib keeps both there when it is set). Best effort:
/// without them matplotlib rebuilds the font list once per session.
fn seed_matplotlib(dir: &Path, homes: &[PathBuf]) {
    if std::fs::create_dir(dir).is_err() {
        return;
    }
    for home in homes {
        for source in [
            home.join(".config/matplotlib"),
            home.join(".cache/matplotlib"),
        ] {
            let Ok(entries) = std::fs::read_dir(&source) else {
                continue;
            };
            for entry in entries.flatten() {
                let name = entry.file_name();
                let wanted = name == "matplotlibrc"
                    || name
                        .to_str()
                        .is_some_and(|n| n.starts_with("fontlist-") && n.ends_with(".json"));
                let regular = entry.file_type().is_ok_and(|t| t.is_file());
                if wanted && regular && !dir.join(&name).exists() {
                    let _ = std::fs::copy(entry.path(), dir.join(&name));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn made_empty_with_the_environments_mode_and_removed_when_dropped() {
        let env = tempfile::tempdir().unwrap();
        std::fs::set_permissions(env.path(), std::fs::Permissions::from_mode(0o751)).unwrap();
        let session = SessionDir::create(Some(env.path()), &[]).unwrap();
        let layers = session.layers().clone();
        assert!(session.is_empty());
        let upper_mode = std::fs::metadata(&layers.upper)
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(upper_mode, 0o751);
        let root_mode = std::fs::metadata(&layers.root)
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(root_mode, 0o700, "nobody else reaches the layers");
        assert!(session.cache().is_dir());
        std::fs::write(layers.upper.join("x.pth"), "").unwrap();
        assert!(!session.is_empty());
        // overlayfs leaves its scratch directory without permissions.
        let scratch = layers.work.join("work");
        std::fs::create_dir(&scratch).unwrap();
        std::fs::set_permissions(&scratch, std::fs::Permissions::from_mode(0o0)).unwrap();
        drop(session);
        assert!(!layers.root.exists());
    }

    #[test]
    fn matplotlibs_config_and_font_list_are_seeded_from_the_home_directory() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(home.path().join(".config/matplotlib")).unwrap();
        std::fs::create_dir_all(home.path().join(".cache/matplotlib")).unwrap();
        std::fs::write(
            home.path().join(".config/matplotlib/matplotlibrc"),
            "backend: agg\n",
        )
        .unwrap();
        std::fs::write(
            home.path().join(".cache/matplotlib/fontlist-v390.json"),
            "{}",
        )
        .unwrap();
        std::fs::write(home.path().join(".cache/matplotlib/tex.cache"), "").unwrap();
        let session = SessionDir::create(None, &[home.path().to_path_buf()]).unwrap();
        let mut seeded: Vec<String> = std::fs::read_dir(session.cache().join("matplotlib"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        seeded.sort();
        assert_eq!(seeded, ["fontlist-v390.json", "matplotlibrc"]);
    }
}
