//! Kernels started through a launcher: an argv prefix that gives a stdio pipe to a Python
//! somewhere else (`docker exec -i box`, `kubectl exec -i pod --`, `ssh -T host`, `bwrap ...`).
//!
//! Nothing is assumed of the far side but a Python 3.8+: the command is
//! `<launcher> <python> -u -c <BOOTSTRAP> <sha256> <memory limit> <grace ms> <bytecode>`.
//! The bootstrap takes the runner from the far user's cache when an entry there has that
//! sha256; otherwise it asks for it (its first line, `farPayload`, says which), reads it
//! from its stdin (a length line, then the bytes) and checks it against the hash. Then it
//! runs `runner/pykernel_far.py`, which caches what was sent, writes the runner to a
//! private directory there and supervises it (see that file). `<bytecode>` is the sha256
//! of the cached bytecode the host vouches for (`start/far_cache.rs`), or `-`. Protocol
//! frames follow on the same pipe.
//!
//! `ssh` joins its words into one line for the far side's shell; `docker`, `kubectl`,
//! `bwrap` and the like pass them on as they are. So the words after the launcher are
//! quoted for a shell when the launcher's program is ssh, or when the caller says so.

use std::collections::BTreeMap;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use once_cell::sync::Lazy;
use sha2::{Digest, Sha256};

use crate::error::{KernelError, Result};

/// The far side's supervisor and loader.
const FAR_PY: &str = include_str!("../../runner/pykernel_far.py");

/// What `python -c` runs. Valid Python 2 syntax throughout, so an old interpreter says
/// what is wrong instead of failing on syntax. It reads with `os.read`: a buffered reader
/// would swallow the protocol frames that follow the runner on the same pipe.
///
/// `k()` finds the cache: the first of `$XDG_CACHE_HOME/pykernel`, `~/.cache/pykernel`,
/// `/tmp/pykernel-cache-<uid>` (then `/var/tmp`, `/dev/shm`) that exists or can be made
/// (mode 0700) is the one; it is used only if it is a directory (not a symlink) of the
/// far user's that nobody else may write, and otherwise there is no cache (a planted one
/// turns caching off, it never leads elsewhere). `g()` reads an entry without following a
/// symlink or blocking on a FIFO and returns it only if its sha256 is the one passed. The
/// cached bytecode holds the supervisor script's own code too (`pykernel_far`), run in
/// place of compiling the script when the host vouched for it. It hashes with `_hashlib`
/// (OpenSSL) itself: the `hashlib` wrapper adds ~1 ms of imports to every start, and the
/// interpreter's own sha256 is some 7 times slower on the ~1.2 MB it checks.
const BOOTSTRAP: &str = r#"import os,sys
if sys.version_info<(3,8):sys.exit("pykernel: the far side's Python is %d.%d; pykernel needs 3.8 or newer"%sys.version_info[:2])
def r(n):
 b=b""
 while len(b)<n:
  c=os.read(0,n-len(b))
  if not c:sys.exit("pykernel: the link closed while the runner was being sent")
  b+=c
 return b
def k():
 u=os.getuid();x=os.environ.get("XDG_CACHE_HOME","");h=os.path.expanduser("~")
 for p,c in[(x,x+"/pykernel"),(h,h+"/.cache/pykernel")]+[(t,t+"/pykernel-cache-%d"%u)for t in("/tmp","/var/tmp","/dev/shm")]:
  if p[:1]!="/":continue
  try:os.makedirs(os.path.dirname(c),0o700,True);os.mkdir(c,0o700)
  except FileExistsError:pass
  except OSError:continue
  try:s=os.lstat(c)
  except OSError:return
  return c if s.st_uid==u and s.st_mode&0o170022==0o40000 else None
try:from _hashlib import openssl_sha256 as S
except ImportError:from hashlib import sha256 as S
def g(n,s):
 try:
  f=os.open(c+"/"+n,os.O_RDONLY|os.O_NOFOLLOW|os.O_NONBLOCK)
  try:d=os.read(f,1<<26)
  finally:os.close(f)
 except OSError:return
 if S(d).hexdigest()==s:return d
h=sys.argv[1];c=k();d=c and g("runner-"+h,h)
os.write(1,b'{"type":"farPayload","need":%s}\n'%(b"false"if d else b"true"))
w=not d
if w:
 n=b""
 while n[-1:]!=b"\n":n+=r(1)
 d=r(int(n))
 if S(d).hexdigest()!=h:sys.exit("pykernel: the runner arrived damaged (its sha256 differs)")
p=d.split(b"\0");b=x=None;v=sys.argv[4]
if not w and v!="-":b=g("bytecode-%s-%s"%(h,sys.modules["_frozen_importlib_external"].MAGIC_NUMBER.hex()),v)
if b:
 import marshal
 e=b.index(b"\n");x=b[:e].split()
 if b"pykernel_far"in x:i=x.index(b"pykernel_far");o=e+1+int(x[i+1]);x=marshal.loads(b[o:o+int(x[i+2])])
 else:x=None
exec(x or compile(p[0],"pykernel_far.py","exec"),{"__name__":"pykernel_far","FILES":p[1:],"CACHE":c,"BODY":d if w else None,"BYTECODE":b,"SOURCE":p[0]})
"#;

/// What `python -c` runs to bring a new link to a far side whose link dropped (a kept
/// link, see `kernel/far_link.rs`): it reads the host's request line (the token) from
/// its stdin, and hands that line and its stdin, stdout and stderr to the supervisor
/// over the socket the supervisor named (in hex, the argument); the supervisor answers
/// on the stdout it got (`farAttached`, or `farRefused` with a reason) and from then on
/// the link is this process's pipes. It waits until the supervisor lets it go, so the
/// tool that runs it (sshd, `docker exec`) keeps the pipes open. A supervisor that is
/// gone is refused here (`gone`).
const ATTACH: &str = r#"import os,sys,socket,array
l=b""
while l[-1:]!=b"\n":
 c=os.read(0,1)
 if not c:sys.exit(0)
 l+=c
d,n=os.path.split(bytes.fromhex(sys.argv[1]))
s=socket.socket(socket.AF_UNIX)
try:os.chdir(d);s.connect(n)
except OSError:os.write(1,b'{"type":"farRefused","reason":"gone"}\n');sys.exit(1)
s.sendmsg([l],[(socket.SOL_SOCKET,socket.SCM_RIGHTS,array.array("i",[0,1,2]).tobytes())])
z=os.open(os.devnull,os.O_RDWR)
for f in(0,1,2):os.dup2(z,f)
s.recv(1)
"#;

/// The bytes sent ahead of the protocol, and the sha256 the bootstrap checks them against.
pub struct Payload {
    /// `<length>\n` and the body: the far side's script, then each runner file's name and
    /// contents, NUL-separated (Python sources hold no NUL).
    pub bytes: Vec<u8>,
    pub sha256: String,
}

pub static PAYLOAD: Lazy<Payload> = Lazy::new(|| {
    let mut body = FAR_PY.as_bytes().to_vec();
    for (name, text) in crate::start::runner_files::files() {
        body.push(0);
        body.extend_from_slice(name.as_bytes());
        body.push(0);
        body.extend_from_slice(text.as_bytes());
    }
    let sha256 = Sha256::digest(&body)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let mut bytes = format!("{}\n", body.len()).into_bytes();
    bytes.extend_from_slice(&body);
    Payload { bytes, sha256 }
});

/// An argv prefix and how its words reach the far side.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Launcher {
    pub argv: Vec<String>,
    /// The far side runs the words through a shell (ssh does), so they are quoted.
    pub shell: bool,
}

impl Launcher {
    /// Checks `argv`; `shell` defaults to whether its program is ssh.
    pub fn new(argv: Vec<String>, shell: Option<bool>) -> Result<Self> {
        let invalid = |reason: &str| KernelError::InvalidArgument {
            name: "launcher",
            reason: reason.to_string(),
        };
        let Some(program) = argv.first() else {
            return Err(invalid(
                "must name a program, e.g. ['ssh', '-T', 'host'] or ['docker', 'exec', '-i', 'box']",
            ));
        };
        if program.is_empty() {
            return Err(invalid("its program (the first word) is empty"));
        }
        if argv.iter().any(|w| w.contains('\0')) {
            return Err(invalid("a word holds a NUL byte"));
        }
        let shell = shell.unwrap_or_else(|| is_ssh(program));
        Ok(Self { argv, shell })
    }

    /// Its program is ssh: the one launcher that uses the host's ssh agent.
    pub fn is_ssh(&self) -> bool {
        is_ssh(&self.argv[0])
    }

    /// The command that starts the far side's Python; its stdio are pipes. It runs in a
    /// session of its own (the terminal's Ctrl-C aimed at the host does not reach it) with
    /// `env`, the host's variables filtered as for a local kernel: a local launcher
    /// (bwrap, unshare) passes them on to the kernel.
    /// `reattach`: how long the far side keeps the kernel for a later link when its link
    /// drops (none: it ends the kernel then).
    pub fn command(
        &self,
        interpreter: &str,
        memory_limit_bytes: Option<u64>,
        grace: Duration,
        bytecode: Option<&str>,
        reattach: Option<Duration>,
        env: &BTreeMap<String, String>,
    ) -> Command {
        self.far_command(
            interpreter,
            BOOTSTRAP,
            &[
                PAYLOAD.sha256.clone(),
                memory_limit_bytes.map_or("-".into(), |n| n.to_string()),
                grace.as_millis().to_string(),
                bytecode.unwrap_or("-").to_string(),
                reattach.map_or("-".into(), |d| d.as_millis().to_string()),
            ],
            env,
        )
    }

    /// The command that brings a new link to the supervisor listening at `socket` (its
    /// path, as the far side reported it, in hex): see [`ATTACH`].
    pub fn attach_command(
        &self,
        interpreter: &str,
        socket: &str,
        env: &BTreeMap<String, String>,
    ) -> Command {
        self.far_command(interpreter, ATTACH, &[socket.to_string()], env)
    }

    /// `<interpreter> -u -c <script> <args...>` after the launcher's words.
    fn far_command(
        &self,
        interpreter: &str,
        script: &str,
        args: &[String],
        env: &BTreeMap<String, String>,
    ) -> Command {
        let mut words = vec![
            interpreter.to_string(),
            "-u".into(),
            "-c".into(),
            script.into(),
        ];
        words.extend_from_slice(args);
        let mut cmd = Command::new(&self.argv[0]);
        cmd.args(&self.argv[1..]);
        if self.shell {
            cmd.args(words.iter().map(|w| shell_quote(w)));
        } else {
            cmd.args(words);
        }
        cmd.env_clear()
            .envs(env)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: only async-signal-safe system calls between fork and exec.
        unsafe {
            cmd.pre_exec(|| {
                crate::start::command::close_inherited_fds_on_exec();
                nix::unistd::setsid().map_err(std::io::Error::from)?;
                Ok(())
            });
        }
        cmd
    }

    /// How the launcher reads in messages: its program and first words.
    pub fn describe(&self) -> String {
        self.argv.join(" ")
    }
}

fn is_ssh(program: &str) -> bool {
    let name = program.rsplit('/').next().unwrap_or(program);
    matches!(name, "ssh" | "autossh")
}

/// One word for a POSIX shell: single-quoted, with `'` written as `'\''`.
pub fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-_./=:,+@%".contains(&b))
    {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_gets_its_words_quoted_and_others_as_they_are() {
        assert!(
            Launcher::new(vec!["ssh".into(), "h".into()], None)
                .unwrap()
                .shell
        );
        assert!(
            Launcher::new(vec!["/usr/bin/ssh".into()], None)
                .unwrap()
                .shell
        );
        assert!(!Launcher::new(vec!["docker".into()], None).unwrap().shell);
        assert!(
            Launcher::new(vec!["my-ssh".into()], Some(true))
                .unwrap()
                .shell
        );
        for bad in [vec![], vec![String::new()], vec!["a\0b".to_string()]] {
            let err = Launcher::new(bad, None).unwrap_err();
            assert_eq!(err.code(), "ERR_INVALID_ARG");
        }
    }

    #[test]
    fn shell_quoting_survives_sh() {
        for word in [BOOTSTRAP, "it's", "", "a b", "$HOME", "plain-word"] {
            let out = std::process::Command::new("sh")
                .args(["-c", &format!("printf %s {}", shell_quote(word))])
                .output()
                .unwrap();
            assert_eq!(String::from_utf8(out.stdout).unwrap(), word);
        }
    }

    #[test]
    fn the_payload_carries_every_runner_file_and_its_hash() {
        let body = &PAYLOAD.bytes[PAYLOAD.bytes.iter().position(|&b| b == b'\n').unwrap() + 1..];
        let parts: Vec<&[u8]> = body.split(|&b| b == 0).collect();
        assert_eq!(parts[0], FAR_PY.as_bytes());
        assert_eq!(
            (parts.len() - 1) / 2,
            crate::start::runner_files::files().len()
        );
        let sha: String = Sha256::digest(body)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        assert_eq!(sha, PAYLOAD.sha256);
    }
}
