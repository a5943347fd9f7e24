//! What a kernel keeps on the host's disk for a session: the key-value store shared by
//! JavaScript and Python, and the checked, no-symlink file operations everything that
//! writes under a directory a cell can reach goes through.

pub mod beneath;
pub mod kv;
pub mod safe_fs;
pub mod uri_files;
pub mod uri_roots;
