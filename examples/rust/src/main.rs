//! photon from Rust through the C ABI: a small safe wrapper (Engine) over the
//! hand-written declarations in ffi.rs, then three greedy requests stepped
//! and polled to the end.
//!
//!   PKG_CONFIG_PATH=<prefix>/lib/pkgconfig cargo run -- models/stories260K
mod ffi;

use std::ffi::{CStr, CString};
use std::mem::{size_of, MaybeUninit};
use std::ptr;

/// A photon error: the status name and the thread's message.
#[derive(Debug)]
struct Error(String);

fn check(status: ffi::photon_status) -> Result<(), Error> {
    if status == ffi::PHOTON_OK {
        return Ok(());
    }
    // Both strings are owned by photon (static / thread-local): copy them now.
    let name = unsafe { CStr::from_ptr(ffi::photon_status_string(status)) };
    let message = unsafe { CStr::from_ptr(ffi::photon_last_error_message()) };
    Err(Error(format!("{}: {}", name.to_string_lossy(), message.to_string_lossy())))
}

/// Owns a photon_engine; photon_engine_destroy on drop.
struct Engine(*mut ffi::photon_engine);

/// One event with its text piece copied out of the poll buffer.
struct Event {
    request_id: u64,
    token_id: i32,
    finished: bool,
    text: String,
}

impl Engine {
    fn open_cpu(model_dir: &str) -> Result<Engine, Error> {
        let dir = CString::new(model_dir).expect("no NUL in the path");
        let mut params = MaybeUninit::<ffi::photon_engine_params>::uninit();
        unsafe {
            check(ffi::photon_engine_params_init(params.as_mut_ptr(), size_of::<ffi::photon_engine_params>()))?;
        }
        let mut params = unsafe { params.assume_init() };
        params.backend = ffi::PHOTON_BACKEND_CPU;
        params.kv_blocks = 64;
        let mut raw = ptr::null_mut();
        unsafe { check(ffi::photon_engine_open(&mut raw, dir.as_ptr(), &params))? };
        Ok(Engine(raw))
    }

    fn submit_greedy(&mut self, prompt: &str, max_tokens: i32) -> Result<u64, Error> {
        let mut params = MaybeUninit::<ffi::photon_request_params>::uninit();
        unsafe {
            check(ffi::photon_request_params_init(params.as_mut_ptr(), size_of::<ffi::photon_request_params>()))?;
        }
        let mut params = unsafe { params.assume_init() };
        params.temperature = 0.0;
        params.max_tokens = max_tokens;
        let mut id = 0u64;
        // The prompt is (pointer, length): a Rust &str needs no NUL.
        unsafe {
            check(ffi::photon_engine_submit_text(
                &mut id,
                self.0,
                prompt.as_ptr().cast(),
                prompt.len(),
                ptr::null(),
                &params,
            ))?
        };
        Ok(id)
    }

    fn step(&mut self) -> Result<(), Error> {
        unsafe { check(ffi::photon_engine_step(ptr::null_mut(), self.0)) }
    }

    fn poll(&mut self) -> Result<Vec<Event>, Error> {
        let mut events = [ffi::photon_event::default(); 32];
        let mut text = vec![0u8; 8192];
        let mut n = 0usize;
        unsafe {
            check(ffi::photon_engine_poll(
                &mut n,
                self.0,
                events.as_mut_ptr(),
                size_of::<ffi::photon_event>(),
                events.len(),
                text.as_mut_ptr().cast(),
                text.len(),
                ptr::null_mut(),
                0,
            ))?
        };
        Ok(events[..n]
            .iter()
            .map(|e| Event {
                request_id: e.request_id,
                token_id: e.token_id,
                finished: e.finish_reason != ffi::PHOTON_FINISH_NONE,
                text: String::from_utf8_lossy(&text[e.text_offset..e.text_offset + e.text_len]).into_owned(),
            })
            .collect())
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        unsafe { ffi::photon_engine_destroy(self.0) }
    }
}

fn run(model_dir: &str) -> Result<(), Error> {
    let prompts = [
        "Once upon a time",
        "Lily and Ben were best friends. One day, they",
        "Tom saw a cat named Zoë 🐱 in the garden.",
    ];
    let version = unsafe { CStr::from_ptr(ffi::photon_version_string()) };
    println!("libphoton {}", version.to_string_lossy());
    let mut engine = Engine::open_cpu(model_dir)?;
    let ids: Vec<u64> = prompts.iter().map(|p| engine.submit_greedy(p, 64)).collect::<Result<_, _>>()?;
    let mut tokens: Vec<Vec<i32>> = vec![Vec::new(); ids.len()];
    let mut texts: Vec<String> = vec![String::new(); ids.len()];
    let mut finished = 0;
    while finished < ids.len() {
        engine.step()?;
        for ev in engine.poll()? {
            let i = match ids.iter().position(|&id| id == ev.request_id) {
                Some(i) => i,
                None => continue,
            };
            if ev.token_id >= 0 {
                tokens[i].push(ev.token_id);
            }
            texts[i].push_str(&ev.text);
            if ev.finished {
                finished += 1;
            }
        }
    }
    for (i, (t, s)) in tokens.iter().zip(&texts).enumerate() {
        let list: Vec<String> = t.iter().map(|id| id.to_string()).collect();
        println!("request {} tokens: {}", i, list.join(" "));
        println!("request {} text: {}", i, s);
    }
    Ok(())
}

fn main() {
    let model_dir = std::env::args().nth(1).unwrap_or_else(|| "models/stories260K".to_string());
    if let Err(Error(message)) = run(&model_dir) {
        eprintln!("error: {}", message);
        std::process::exit(1);
    }
}
