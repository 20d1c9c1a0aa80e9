//! Fixed answers: status reason phrases, nginx-style error pages (nginx's exact layout, with `corelb` in the
//! footer where nginx prints its name), and the cached `Date` header value.

use crate::config::headers::ServerTokens;

/// The name in the `Server` header and in error page footers under `server_tokens off`.
pub const SERVER_NAME: &str = "corelb";

/// The name with corelb's version: the `Server` header and error page footers under `server_tokens on` (nginx's
/// default, where nginx says `nginx/VERSION`).
pub const SERVER_FULL: &str = concat!("corelb/", env!("CARGO_PKG_VERSION"));

/// The `Server` value and error page footer for `tokens`.
pub fn server_name(tokens: ServerTokens) -> &'static str {
    match tokens {
        ServerTokens::On => SERVER_FULL,
        ServerTokens::Off => SERVER_NAME,
    }
}

/// The reason phrase nginx uses for `code` (empty for codes it has no text for).
pub fn reason(code: u16) -> &'static str {
    match code {
        100 => "Continue",
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Moved Temporarily",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Not Allowed",
        406 => "Not Acceptable",
        407 => "Proxy Authentication Required",
        408 => "Request Time-out",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Request Entity Too Large",
        414 => "Request-URI Too Large",
        415 => "Unsupported Media Type",
        416 => "Requested Range Not Satisfiable",
        421 => "Misdirected Request",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Temporarily Unavailable",
        504 => "Gateway Time-out",
        505 => "HTTP Version Not Supported",
        507 => "Insufficient Storage",
        _ => "",
    }
}

/// Whether nginx answers `code` with an HTML error page when no text is given.
pub fn has_error_page(code: u16) -> bool {
    // the codes of `ngx_http_error_pages`; any other is answered with no body
    matches!(code, 301..=303 | 307 | 308 | 400..=416 | 421 | 429 | 494..=498 | 500..=505 | 507)
}

/// nginx's internal 497 (`NGX_HTTP_TO_HTTPS`): a plain HTTP request came to a TLS port; sent as 400.
pub const TO_HTTPS: u16 = 497;

/// The status a client sees for `code`: nginx's internal 494 (a head too large for its buffers) is sent as 400.
pub fn sent_status(code: u16) -> u16 {
    // and 495-497, the TLS ones (`ngx_http_special_response_handler` sets `err_status` 400 for the four)
    match code {
        crate::http::head_buffers::HEADER_TOO_LARGE | 495..=497 => 400,
        _ => code,
    }
}

/// Appends nginx's error page for `code` (e.g. `<html>\r\n<head><title>502 Bad Gateway</title></head>...`), its
/// footer naming `signature`.
pub fn append_error_page(code: u16, signature: &str, out: &mut Vec<u8>) {
    if code == crate::http::head_buffers::HEADER_TOO_LARGE {
        out.extend_from_slice(
            b"<html>\r\n<head><title>400 Request Header Or Cookie Too Large</title></head>\r\n<body>\r\n\
              <center><h1>400 Bad Request</h1></center>\r\n<center>Request Header Or Cookie Too Large</center>\r\n\
              <hr><center>",
        );
        out.extend_from_slice(signature.as_bytes());
        out.extend_from_slice(b"</center>\r\n</body>\r\n</html>\r\n");
        return;
    }
    let special = match code {
        495 => Some("The SSL certificate error"),
        496 => Some("No required SSL certificate was sent"),
        497 => Some("The plain HTTP request was sent to HTTPS port"),
        _ => None,
    };
    if let Some(what) = special {
        out.extend_from_slice(b"<html>\r\n<head><title>400 ");
        out.extend_from_slice(what.as_bytes());
        out.extend_from_slice(b"</title></head>\r\n<body>\r\n<center><h1>400 Bad Request</h1></center>\r\n<center>");
        out.extend_from_slice(what.as_bytes());
        out.extend_from_slice(b"</center>\r\n<hr><center>");
        out.extend_from_slice(signature.as_bytes());
        out.extend_from_slice(b"</center>\r\n</body>\r\n</html>\r\n");
        return;
    }
    // nginx's pages say `302 Found` and `401 Authorization Required` where the status lines do not
    let title = match code {
        302 => "302 Found".to_string(),
        401 => "401 Authorization Required".to_string(),
        // 498 (a request canceled) gets the 404 page
        498 => status_text(404),
        _ => status_text(code),
    };
    out.extend_from_slice(b"<html>\r\n<head><title>");
    out.extend_from_slice(title.as_bytes());
    out.extend_from_slice(b"</title></head>\r\n<body>\r\n<center><h1>");
    out.extend_from_slice(title.as_bytes());
    out.extend_from_slice(b"</h1></center>\r\n<hr><center>");
    out.extend_from_slice(signature.as_bytes());
    out.extend_from_slice(b"</center>\r\n</body>\r\n</html>\r\n");
}

/// `"502 Bad Gateway"`: the code and its reason phrase.
pub fn status_text(code: u16) -> String {
    let r = reason(code);
    if r.is_empty() {
        code.to_string()
    } else {
        format!("{code} {r}")
    }
}

/// Appends `n` in decimal without allocating.
pub fn append_decimal(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// The `Date` header value, formatted once per second.
#[derive(Debug, Clone)]
pub struct DateCache {
    secs: u64,
    text: [u8; 29],
}

impl Default for DateCache {
    fn default() -> Self {
        let mut d = DateCache {
            secs: u64::MAX,
            text: [b' '; 29],
        };
        d.refresh(0);
        d
    }
}

impl DateCache {
    /// The value for `now` (seconds since the epoch), reformatted only when the second changed.
    pub fn get(&mut self, now: u64) -> &[u8] {
        if now != self.secs {
            self.refresh(now);
        }
        &self.text
    }

    fn refresh(&mut self, now: u64) {
        self.secs = now;
        self.text = format_http_date(now);
    }
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` for `secs` since the epoch.
pub fn format_http_date(secs: u64) -> [u8; 29] {
    const DAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"];
    const MONTHS: [&[u8; 3]; 12] = [
        b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec",
    ];
    let days = secs / 86400;
    let rem = secs % 86400;
    let (y, m, d) = civil_from_days(days as i64);
    let mut out = [b' '; 29];
    out[..3].copy_from_slice(DAYS[(days % 7) as usize]);
    out[3] = b',';
    two(&mut out[5..7], d as u64);
    out[8..11].copy_from_slice(MONTHS[(m - 1) as usize]);
    two(&mut out[12..14], (y / 100) as u64);
    two(&mut out[14..16], (y % 100) as u64);
    two(&mut out[17..19], rem / 3600);
    out[19] = b':';
    two(&mut out[20..22], rem / 60 % 60);
    out[22] = b':';
    two(&mut out[23..25], rem % 60);
    out[26..29].copy_from_slice(b"GMT");
    out
}

fn two(out: &mut [u8], v: u64) {
    out[0] = b'0' + (v / 10 % 10) as u8;
    out[1] = b'0' + (v % 10) as u8;
}

/// Days since 1970-01-01 to (year, month 1..=12, day 1..=31) (Howard Hinnant's algorithm).
pub(crate) fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_page_matches_nginx_layout() {
        let mut out = Vec::new();
        append_error_page(502, SERVER_NAME, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1>\
             </center>\r\n<hr><center>corelb</center>\r\n</body>\r\n</html>\r\n"
        );
        assert!(has_error_page(404) && !has_error_page(200) && !has_error_page(304));
        let mut out = Vec::new();
        append_error_page(494, SERVER_NAME, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "<html>\r\n<head><title>400 Request Header Or Cookie Too Large</title></head>\r\n<body>\r\n\
             <center><h1>400 Bad Request</h1></center>\r\n<center>Request Header Or Cookie Too Large</center>\r\n\
             <hr><center>corelb</center>\r\n</body>\r\n</html>\r\n"
        );
        assert_eq!((sent_status(494), sent_status(414)), (400, 414));
        assert_eq!((sent_status(497), sent_status(498)), (400, 498));
    }

    /// `ngx_http_error_pages`: which codes have a page, and the pages whose title is not the status line.
    #[test]
    fn pages_as_nginx_error_pages_table() {
        let with: Vec<u16> = (300..600).filter(|&c| has_error_page(c)).collect();
        let mut expected: Vec<u16> = vec![301, 302, 303, 307, 308];
        expected.extend(400..=416);
        expected.extend([421, 429, 494, 495, 496, 497, 498, 500, 501, 502, 503, 504, 505, 507]);
        assert_eq!(with, expected);
        let page = |code| {
            let mut out = Vec::new();
            append_error_page(code, "nginx", &mut out);
            String::from_utf8(out).unwrap()
        };
        assert!(page(302)
            .starts_with("<html>\r\n<head><title>302 Found</title></head>\r\n<body>\r\n<center><h1>302 Found</h1>"));
        assert!(page(401).contains("<title>401 Authorization Required</title>"));
        assert!(page(498).contains("<title>404 Not Found</title>"));
        assert!(page(416).contains("<title>416 Requested Range Not Satisfiable</title>"));
        assert_eq!(
            page(497),
            "<html>\r\n<head><title>400 The plain HTTP request was sent to HTTPS port</title></head>\r\n<body>\r\n\
             <center><h1>400 Bad Request</h1></center>\r\n<center>The plain HTTP request was sent to HTTPS port</center>\r\n\
             <hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
        );
    }

    #[test]
    fn dates_format_as_rfc_7231() {
        assert_eq!(&format_http_date(784_111_777), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(&format_http_date(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(&format_http_date(951_782_400), b"Tue, 29 Feb 2000 00:00:00 GMT");
        let mut c = DateCache::default();
        assert_eq!(c.get(784_111_777), b"Sun, 06 Nov 1994 08:49:37 GMT");
    }

    #[test]
    fn decimals() {
        let mut out = Vec::new();
        append_decimal(&mut out, 0);
        out.push(b' ');
        append_decimal(&mut out, u64::MAX);
        assert_eq!(out, b"0 18446744073709551615");
    }
}
