//! A static update site served over loopback HTTP for the tests: URL path -> bytes, which a
//! test can change between requests (as an attacker who controls the host would).

use std::collections::HashMap;
use std::fs;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::{Arc, Mutex};

pub type Site = Arc<Mutex<HashMap<String, Vec<u8>>>>;
pub type Requests = Arc<Mutex<Vec<String>>>;

/// Serves `site` (URL path -> bytes) on 127.0.0.1 until the test ends; one request a connection.
pub fn serve(site: Site) -> String {
    serve_logged(site).0
}

/// As `serve`, and the paths asked for, in order.
pub fn serve_logged(site: Site) -> (String, Requests) {
    let requests: Requests = Arc::new(Mutex::new(Vec::new()));
    let log = requests.clone();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut s) = stream else { continue };
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            let line = String::from_utf8_lossy(&req).lines().next().unwrap_or("").to_string();
            let path = line.split(' ').nth(1).unwrap_or("/").to_string();
            log.lock().unwrap().push(path.clone());
            // As a static host: the file is the path's, whatever the query (`?reader=`).
            let file = path.split('?').next().unwrap_or("/");
            let body = site.lock().unwrap().get(file).cloned();
            let (status, body) = match body {
                Some(b) => ("200 OK", b),
                None => ("404 Not Found", br#"{"error":"not found","status":404}"#.to_vec()),
            };
            let head = format!("HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = s.write_all(head.as_bytes()).and_then(|_| s.write_all(&body));
        }
    });
    (format!("http://{addr}"), requests)
}

/// Every file under `dir`, as URL path -> bytes.
pub fn load_site(site: &Site, dir: &Path) {
    let mut s = site.lock().unwrap();
    s.clear();
    for (rel, p) in super::files_under(dir) {
        s.insert(format!("/{rel}"), fs::read(&p).unwrap());
    }
}
