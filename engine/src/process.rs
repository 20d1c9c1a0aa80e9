//! The process's own settings from the main context, applied at start: `worker_rlimit_nofile` and `user`.

use crate::config::model::{MainConf, ProcessUser};
use std::io;

/// `worker_rlimit_nofile N`: the soft and hard open-files limits (nginx sets them in each worker).
pub fn set_nofile_limit(main: &MainConf) -> io::Result<()> {
    let Some(n) = main.rlimit_nofile else {
        return Ok(());
    };
    let limit = libc::rlimit {
        rlim_cur: n,
        rlim_max: n,
    };
    // SAFETY: `limit` is a valid rlimit for the call to read.
    if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &limit) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `user`: serve as that account from now on (every thread: glibc applies set*id to the whole process), once
/// the listeners are bound and the log and pid files open, as nginx's workers do. Nothing to do for root.
pub fn drop_privileges(main: &MainConf) -> io::Result<()> {
    let Some(ProcessUser { name, uid, gid }) = &main.user else {
        return Ok(());
    };
    if *uid == 0 {
        return Ok(());
    }
    let c_name = std::ffi::CString::new(name.as_str()).map_err(|_| io::ErrorKind::InvalidInput)?;
    // SAFETY: plain system calls on valid ids and a NUL-terminated name; the order (groups, gid, uid) is the one
    // that leaves no root group behind.
    let failed =
        unsafe { libc::setgid(*gid) != 0 || libc::initgroups(c_name.as_ptr(), *gid) != 0 || libc::setuid(*uid) != 0 };
    if failed {
        return Err(io::Error::last_os_error());
    }
    crate::log_notice!("serving as user \"{name}\" (uid {uid}, gid {gid})");
    Ok(())
}
