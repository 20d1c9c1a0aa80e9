//! Start-up checks with messages a user can act on: which CPUs the shards get (the process affinity mask),
//! whether io_uring is allowed (probed with a raw `io_uring_setup`, before glommio would panic with a misleading
//! message), and whether `RLIMIT_MEMLOCK` covers glommio's registered memory (raising the soft limit if it can).

use crate::config::model::{CpuAffinity, Workers};
use std::io;

/// A start-up check that failed.
#[derive(Debug, thiserror::Error)]
pub enum PreflightError {
    #[error(
        "io_uring is not permitted here (io_uring_setup: EPERM): kernel.io_uring_disabled is set or a seccomp \
         profile blocks it; allow io_uring or use \"worker_runtime tokio\""
    )]
    IoUringDenied,
    #[error("this kernel has no io_uring (io_uring_setup: ENOSYS); use \"worker_runtime tokio\"")]
    IoUringMissing,
    #[error("io_uring_setup failed ({0}); use \"worker_runtime tokio\"")]
    IoUringFailed(io::Error),
    #[error(
        "RLIMIT_MEMLOCK is {have} bytes (hard limit {hard}); glommio needs {need} for {shards} shard(s): raise it \
         (ulimit -l, LimitMEMLOCK=) or use \"worker_runtime tokio\""
    )]
    MemlockTooLow {
        have: u64,
        hard: u64,
        need: u64,
        shards: usize,
    },
    #[error("could not read the CPU affinity mask ({0})")]
    Affinity(io::Error),
    #[error("the CPU affinity mask of this process is empty")]
    NoCpus,
    #[error("worker_processes 0: at least one worker is needed")]
    NoWorkers,
    #[error("\"worker_cpu_affinity\" gives worker {worker} no CPU this process may run on")]
    AffinityMask { worker: usize },
}

impl PreflightError {
    /// The process exit code for this failure (distinct per cause).
    pub fn exit_code(&self) -> u8 {
        match self {
            PreflightError::IoUringDenied | PreflightError::IoUringMissing | PreflightError::IoUringFailed(_) => 4,
            PreflightError::MemlockTooLow { .. } => 5,
            PreflightError::Affinity(_)
            | PreflightError::NoCpus
            | PreflightError::NoWorkers
            | PreflightError::AffinityMask { .. } => 6,
        }
    }
}

/// The CPU of each shard: `worker_processes N` shards over the CPUs of the affinity mask (in order, wrapping when
/// there are more shards than CPUs), `auto` one shard per allowed CPU; `worker_cpu_affinity` as nginx's
/// `ngx_get_cpu_affinity` picks (`auto MASK`: the mask's CPUs in turn; masks: worker N's own, the last for the
/// rest, pinned to the lowest allowed CPU of it: a shard runs on one CPU).
pub fn shard_cpus(
    workers: Workers,
    allowed: &[usize],
    affinity: Option<&CpuAffinity>,
) -> Result<Vec<usize>, PreflightError> {
    if allowed.is_empty() {
        return Err(PreflightError::NoCpus);
    }
    let n = match workers {
        Workers::Auto => allowed.len(),
        Workers::Count(0) => return Err(PreflightError::NoWorkers),
        Workers::Count(n) => n,
    };
    let pick = |worker: usize, cpus: &[usize]| -> Result<usize, PreflightError> {
        match affinity {
            Some(CpuAffinity::Auto(Some(_))) => cpus
                .get(worker % cpus.len().max(1))
                .copied()
                .filter(|c| allowed.contains(c))
                .ok_or(PreflightError::AffinityMask { worker }),
            Some(CpuAffinity::Masks(_)) => cpus
                .iter()
                .copied()
                .find(|c| allowed.contains(c))
                .ok_or(PreflightError::AffinityMask { worker }),
            Some(CpuAffinity::Auto(None)) | None => Ok(allowed[worker % allowed.len()]),
        }
    };
    (0..n)
        .map(|w| {
            let cpus: &[usize] = match affinity {
                Some(CpuAffinity::Auto(Some(mask))) => mask,
                Some(CpuAffinity::Masks(masks)) => masks.get(w).or(masks.last()).map_or(&[], Vec::as_slice),
                _ => &[],
            };
            pick(w, cpus)
        })
        .collect()
}

/// [`shard_cpus`] over this process's affinity mask.
pub fn plan_cpus(workers: Workers, affinity: Option<&CpuAffinity>) -> Result<Vec<usize>, PreflightError> {
    let allowed = crate::runtime::allowed_cpus().map_err(PreflightError::Affinity)?;
    shard_cpus(workers, &allowed, affinity)
}

/// Probes `io_uring_setup` with a one-entry ring and closes it.
pub fn probe_io_uring() -> Result<(), PreflightError> {
    // struct io_uring_params is 120 bytes; zeroed means "no flags".
    let mut params = [0u8; 120];
    // SAFETY: io_uring_setup reads and writes `params` (120 bytes, the kernel's struct size) and returns an fd.
    let fd = unsafe { libc::syscall(libc::SYS_io_uring_setup, 1u32, params.as_mut_ptr()) };
    if fd >= 0 {
        // SAFETY: `fd` is a descriptor this call just opened.
        unsafe { libc::close(fd as libc::c_int) };
        return Ok(());
    }
    let err = io::Error::last_os_error();
    Err(match err.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => PreflightError::IoUringDenied,
        Some(libc::ENOSYS) => PreflightError::IoUringMissing,
        _ => PreflightError::IoUringFailed(err),
    })
}

/// Makes sure the soft `RLIMIT_MEMLOCK` is at least `need` bytes, raising it up to the hard limit if necessary.
pub fn ensure_memlock(need: u64, shards: usize) -> Result<(), PreflightError> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit fills the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } != 0 {
        return Ok(()); // cannot tell: let glommio report it
    }
    let (have, hard) = (lim.rlim_cur, lim.rlim_max);
    if have == libc::RLIM_INFINITY || have >= need {
        return Ok(());
    }
    if hard == libc::RLIM_INFINITY || hard >= need {
        lim.rlim_cur = need;
        // SAFETY: setrlimit reads the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &lim) } == 0 {
            return Ok(());
        }
    }
    Err(PreflightError::MemlockTooLow {
        have,
        hard,
        need,
        shards,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shards_spread_over_allowed_cpus() {
        assert_eq!(shard_cpus(Workers::Auto, &[2, 5], None).unwrap(), vec![2, 5]);
        assert_eq!(shard_cpus(Workers::Count(3), &[2, 5], None).unwrap(), vec![2, 5, 2]);
        assert_eq!(shard_cpus(Workers::Count(1), &[7], None).unwrap(), vec![7]);
        assert!(matches!(
            shard_cpus(Workers::Count(0), &[1], None),
            Err(PreflightError::NoWorkers)
        ));
        assert!(matches!(
            shard_cpus(Workers::Auto, &[], None),
            Err(PreflightError::NoCpus)
        ));
        // worker_cpu_affinity auto 1010: CPUs 1 and 3 in turn
        let auto = CpuAffinity::Auto(Some(vec![1, 3]));
        assert_eq!(
            shard_cpus(Workers::Count(3), &[0, 1, 2, 3], Some(&auto)).unwrap(),
            vec![1, 3, 1]
        );
        assert_eq!(
            shard_cpus(Workers::Count(2), &[0, 1], Some(&CpuAffinity::Auto(None))).unwrap(),
            vec![0, 1]
        );
        // masks: each worker its own, the last for the rest, the lowest allowed CPU of it
        let masks = CpuAffinity::Masks(vec![vec![0], vec![1, 2]]);
        assert_eq!(
            shard_cpus(Workers::Count(3), &[0, 2], Some(&masks)).unwrap(),
            vec![0, 2, 2]
        );
        assert!(matches!(
            shard_cpus(Workers::Count(1), &[0], Some(&CpuAffinity::Masks(vec![vec![5]]))),
            Err(PreflightError::AffinityMask { worker: 0 })
        ));
        assert_eq!(PreflightError::NoCpus.exit_code(), 6);
    }

    #[test]
    fn probes_do_not_fail_spuriously() {
        // Either outcome is legitimate on some machine; what must hold is that a refusal maps to an io_uring error.
        if let Err(e) = probe_io_uring() {
            assert_eq!(e.exit_code(), 4);
        }
        assert!(
            ensure_memlock(64 * 1024, 1).is_ok(),
            "64 KiB is below every default limit"
        );
    }
}
