//! placeholder: replaced by the balancer work.
