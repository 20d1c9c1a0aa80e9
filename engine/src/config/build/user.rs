//! `user USER [GROUP]` (nginx's `ngx_set_user`): the account the process serves as once its sockets are bound and
//! its files open. As in nginx the names are looked up at load only when running as root (else the directive is
//! a warning and nothing changes), and a missing GROUP means the group named like USER.

use super::{arg, Build};
use crate::config::error::ConfigError;
use crate::config::model::ProcessUser;
use crate::config::parser::Directive;
use std::ffi::CString;

/// Reads `user`: `None` when not running as root (with nginx's warning).
pub fn user(b: &mut Build, d: &Directive) -> Result<Option<ProcessUser>, ConfigError> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        let msg =
            "the \"user\" directive makes sense only if the master process runs with super-user privileges, ignored";
        b.warn(msg, &d.span);
        return Ok(None);
    }
    let name = arg(d, 0);
    let group = d.args.get(1).map_or(name, String::as_str);
    let failed = |call: &str, n: &str| ConfigError::invalid(format!("{call}(\"{n}\") failed"), &d.span);
    let uid = lookup_uid(name).ok_or_else(|| failed("getpwnam", name))?;
    let gid = lookup_gid(group).ok_or_else(|| failed("getgrnam", group))?;
    Ok(Some(ProcessUser {
        name: name.to_string(),
        uid,
        gid,
    }))
}

/// The uid of the account `name`, if it exists.
fn lookup_uid(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // SAFETY: `pwd`, `buf` and `result` are valid for writes for the call; getpwnam_r writes at most `buf.len()`
    // bytes into `buf` and sets `result` to null or to `pwd`.
    unsafe {
        let mut pwd: libc::passwd = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 16 * 1024];
        let mut result: *mut libc::passwd = std::ptr::null_mut();
        let rc = libc::getpwnam_r(c.as_ptr(), &mut pwd, buf.as_mut_ptr(), buf.len(), &mut result);
        (rc == 0 && !result.is_null()).then_some(pwd.pw_uid)
    }
}

/// The gid of the group `name`, if it exists.
fn lookup_gid(name: &str) -> Option<u32> {
    let c = CString::new(name).ok()?;
    // SAFETY: as in `lookup_uid`, for getgrnam_r and a `group` record.
    unsafe {
        let mut grp: libc::group = std::mem::zeroed();
        let mut buf = vec![0 as libc::c_char; 16 * 1024];
        let mut result: *mut libc::group = std::ptr::null_mut();
        let rc = libc::getgrnam_r(c.as_ptr(), &mut grp, buf.as_mut_ptr(), buf.len(), &mut result);
        (rc == 0 && !result.is_null()).then_some(grp.gr_gid)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn looks_accounts_up() {
        assert_eq!(lookup_uid("root"), Some(0));
        assert_eq!(lookup_gid("root"), Some(0));
        assert_eq!(lookup_uid("no-such-user-corelb"), None);
        assert_eq!(lookup_gid("no-such-group-corelb"), None);
        assert_eq!(lookup_uid("a\0b"), None);
    }
}
