//! Reading `gzip`, `gzip_types`, `gzip_min_length`, `gzip_comp_level`, `gzip_vary`, `gzip_proxied`,
//! `gzip_http_version`, `gzip_disable`, `gzip_buffers` and `gzip_static` at one level, merged child over parent
//! as nginx merges them.

use super::{arg, directive_err, flag_slot, unset, value, Build};
use crate::config::error::ConfigError;
use crate::config::gzip::{GzipBuffers, GzipConf, GzipStatic, GzipTypes, PROXIED};
use crate::config::parser::Directive;
use crate::config::regex::{self, Regex};

/// The directives read here.
pub const NAMES: &[&str] = &[
    "gzip",
    "gzip_types",
    "gzip_min_length",
    "gzip_comp_level",
    "gzip_vary",
    "gzip_proxied",
    "gzip_http_version",
    "gzip_disable",
    "gzip_buffers",
    "gzip_static",
];

/// What one level sets.
#[derive(Debug, Clone, Default)]
pub struct GzipLayer {
    enable: Option<bool>,
    types: Option<GzipTypes>,
    min_length: Option<u64>,
    comp_level: Option<u32>,
    vary: Option<bool>,
    /// nginx's bitmask; 0 = not set here.
    proxied: u16,
    http_11: Option<bool>,
    disable: Option<Vec<Regex>>,
    disable_msie6: Option<bool>,
    buffers: Option<GzipBuffers>,
    static_files: Option<GzipStatic>,
}

impl GzipLayer {
    /// Reads `d` (one of [`NAMES`]).
    pub fn directive(&mut self, b: &mut Build, d: &Directive) -> Result<(), ConfigError> {
        match d.name.as_str() {
            "gzip" => flag_slot(&mut self.enable, d)?,
            "gzip_vary" => flag_slot(&mut self.vary, d)?,
            "gzip_types" => self.types(d),
            "gzip_min_length" => {
                unset(&self.min_length, d)?;
                let n = value::parse_size(arg(d, 0)).ok_or_else(|| directive_err(d, "invalid value"))?;
                self.min_length = Some(n);
            }
            "gzip_comp_level" => {
                unset(&self.comp_level, d)?;
                let n = value::atoi(arg(d, 0)).ok_or_else(|| directive_err(d, "invalid number"))?;
                if !(1..=9).contains(&n) {
                    return Err(ConfigError::invalid("value must be between 1 and 9", &d.span));
                }
                self.comp_level = u32::try_from(n).ok();
            }
            "gzip_proxied" => {
                // `ngx_conf_set_bitmask_slot`: values add up, a repeated one is a warning
                for v in &d.args {
                    let Some((_, bit)) = PROXIED.iter().find(|(n, _)| n.eq_ignore_ascii_case(v)) else {
                        return Err(ConfigError::invalid(format!("invalid value \"{v}\""), &d.span));
                    };
                    if self.proxied & bit != 0 {
                        b.warn(&format!("duplicate value \"{v}\""), &d.span);
                    }
                    self.proxied |= bit;
                }
            }
            "gzip_http_version" => {
                unset(&self.http_11, d)?;
                self.http_11 = Some(match arg(d, 0) {
                    "1.0" => false,
                    "1.1" => true,
                    v => return Err(ConfigError::invalid(format!("invalid value \"{v}\""), &d.span)),
                });
            }
            "gzip_disable" => {
                let list = self.disable.get_or_insert_with(Vec::new);
                for v in &d.args {
                    if v == "msie6" {
                        self.disable_msie6 = Some(true);
                        continue;
                    }
                    let re = regex::compile(v, true).map_err(|e| ConfigError::invalid(e.to_string(), &d.span))?;
                    list.push(re);
                }
            }
            "gzip_buffers" => {
                unset(&self.buffers, d)?;
                let invalid = || directive_err(d, "invalid value");
                let number = value::atoi(arg(d, 0)).filter(|&n| n > 0).ok_or_else(invalid)?;
                let size = value::parse_size(arg(d, 1)).filter(|&n| n > 0).ok_or_else(invalid)?;
                self.buffers = Some(GzipBuffers {
                    number: usize::try_from(number).map_err(|_| invalid())?,
                    size: usize::try_from(size).map_err(|_| invalid())?,
                });
            }
            "gzip_static" => {
                unset(&self.static_files, d)?;
                self.static_files = Some(match arg(d, 0) {
                    "off" => GzipStatic::Off,
                    "on" => GzipStatic::On,
                    "always" => GzipStatic::Always,
                    v => return Err(ConfigError::invalid(format!("invalid value \"{v}\""), &d.span)),
                });
            }
            _ => {}
        }
        Ok(())
    }

    /// `gzip_types` (`ngx_http_types_slot`): lines add up, `text/html` is always in, `*` takes every type.
    fn types(&mut self, d: &Directive) {
        for v in &d.args {
            if self.types == Some(GzipTypes::Any) {
                return;
            }
            if v == "*" {
                self.types = Some(GzipTypes::Any);
                return;
            }
            let GzipTypes::List(list) = self.types.get_or_insert_with(GzipTypes::default) else {
                return;
            };
            let v = v.to_ascii_lowercase();
            if !list.contains(&v) {
                list.push(v);
            }
        }
    }

    /// These settings over `parent`'s.
    pub fn over(&self, parent: &GzipLayer) -> GzipLayer {
        GzipLayer {
            enable: self.enable.or(parent.enable),
            types: self.types.clone().or_else(|| parent.types.clone()),
            min_length: self.min_length.or(parent.min_length),
            comp_level: self.comp_level.or(parent.comp_level),
            vary: self.vary.or(parent.vary),
            proxied: if self.proxied != 0 {
                self.proxied
            } else {
                parent.proxied
            },
            http_11: self.http_11.or(parent.http_11),
            disable: self.disable.clone().or_else(|| parent.disable.clone()),
            disable_msie6: self.disable_msie6.or(parent.disable_msie6),
            buffers: self.buffers.or(parent.buffers),
            static_files: self.static_files.or(parent.static_files),
        }
    }

    /// The settings with nginx's defaults for what no level set.
    pub fn conf(&self) -> GzipConf {
        let d = GzipConf::default();
        GzipConf {
            enable: self.enable.unwrap_or(d.enable),
            types: self.types.clone().unwrap_or(d.types),
            min_length: self.min_length.unwrap_or(d.min_length),
            comp_level: self.comp_level.unwrap_or(d.comp_level),
            vary: self.vary.unwrap_or(d.vary),
            proxied: if self.proxied != 0 { self.proxied } else { d.proxied },
            http_11: self.http_11.unwrap_or(d.http_11),
            disable: self.disable.clone().unwrap_or_default(),
            disable_msie6: self.disable_msie6.unwrap_or(d.disable_msie6),
            buffers: self.buffers.unwrap_or(d.buffers),
            static_files: self.static_files.unwrap_or(d.static_files),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::gzip::{PROXIED_ANY, PROXIED_EXPIRED, PROXIED_OFF};
    use crate::config::model::Span;

    fn d(name: &str, args: &[&str]) -> Directive {
        Directive {
            name: name.into(),
            args: args.iter().map(|a| a.to_string()).collect(),
            block: None,
            span: Span::default(),
        }
    }

    fn layer(lines: &[(&str, &[&str])]) -> Result<GzipLayer, ConfigError> {
        let mut b = Build::default();
        let mut l = GzipLayer::default();
        for (name, args) in lines {
            l.directive(&mut b, &d(name, args))?;
        }
        Ok(l)
    }

    #[test]
    fn defaults_and_merge_as_nginx() {
        assert_eq!(GzipLayer::default().conf(), GzipConf::default());
        let http = layer(&[
            ("gzip", &["on"]),
            ("gzip_types", &["Application/JSON"]),
            ("gzip_proxied", &["any"]),
        ])
        .unwrap();
        let loc = layer(&[("gzip_comp_level", &["6"]), ("gzip_types", &["text/css", "text/plain"])]).unwrap();
        let c = loc.over(&http).conf();
        assert!(c.enable);
        assert_eq!(c.comp_level, 6);
        assert_eq!(c.proxied, PROXIED_ANY);
        assert_eq!(
            c.types,
            GzipTypes::List(vec!["text/html".into(), "text/css".into(), "text/plain".into()])
        );
        assert_eq!(
            http.conf().types,
            GzipTypes::List(vec!["text/html".into(), "application/json".into()])
        );
        assert_eq!(
            layer(&[("gzip_types", &["text/css", "*"])]).unwrap().conf().types,
            GzipTypes::Any
        );
        assert_eq!(GzipConf::default().proxied, PROXIED_OFF);
        let p = layer(&[("gzip_proxied", &["expired"]), ("gzip_proxied", &["any"])])
            .unwrap()
            .conf();
        assert_eq!(p.proxied, PROXIED_EXPIRED | PROXIED_ANY, "lines add up");
        let dis = layer(&[("gzip_disable", &["msie6", "^Foo"])]).unwrap().conf();
        assert!(dis.disable_msie6);
        assert!(dis.disable[0].is_match(b"foo/1.0"), "caseless");
        assert_eq!(
            layer(&[("gzip_static", &["always"])]).unwrap().conf().static_files,
            GzipStatic::Always
        );
    }

    #[test]
    fn refuses_as_nginx() {
        let err = |lines: &[(&str, &[&str])]| layer(lines).unwrap_err().to_string();
        assert!(err(&[("gzip_comp_level", &["10"])]).contains("value must be between 1 and 9"));
        assert!(err(&[("gzip_comp_level", &["x"])]).contains("\"gzip_comp_level\" directive invalid number"));
        assert!(err(&[("gzip", &["on"]), ("gzip", &["off"])]).contains("\"gzip\" directive is duplicate"));
        assert!(err(&[("gzip_proxied", &["sometimes"])]).contains("invalid value \"sometimes\""));
        assert!(err(&[("gzip_http_version", &["2.0"])]).contains("invalid value \"2.0\""));
        assert!(err(&[("gzip_buffers", &["0", "4k"])]).contains("\"gzip_buffers\" directive invalid value"));
        assert!(err(&[("gzip_min_length", &["x"])]).contains("\"gzip_min_length\" directive invalid value"));
        assert!(err(&[("gzip_static", &["maybe"])]).contains("invalid value \"maybe\""));
    }
}
