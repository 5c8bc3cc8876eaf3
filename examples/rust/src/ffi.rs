//! Hand-written declarations of the part of photon.h this example uses.
//! Layouts follow photon.h exactly (#[repr(C)], C's bool is Rust's bool,
//! size_t is usize, enums are C ints: i32). Structs that begin with
//! struct_size are filled by photon's *_init functions, so fields that this
//! file does not declare would still get photon's defaults.
#![allow(non_camel_case_types, dead_code)]

use std::os::raw::c_char;

pub type photon_status = i32;
pub const PHOTON_OK: photon_status = 0;

pub type photon_backend = i32;
pub const PHOTON_BACKEND_CPU: photon_backend = 1;

pub type photon_finish_reason = i32;
pub const PHOTON_FINISH_NONE: photon_finish_reason = 0;

#[repr(C)]
pub struct photon_engine {
    _private: [u8; 0],
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct photon_str {
    pub data: *const c_char,
    pub len: usize,
}

#[repr(C)]
pub struct photon_engine_params {
    pub struct_size: u32,
    pub backend: photon_backend,
    pub device: i32,
    pub threads: i32,
    pub kv_blocks: i32,
    pub block_size: i32,
    pub kv_bytes: u64,
    pub kv_memory_fraction: f64,
    pub max_batch_tokens: i32,
    pub max_seqs: i32,
    pub prefix_caching: bool,
    pub load_tokenizer: bool,
}

#[repr(C)]
pub struct photon_tokenize_params {
    pub struct_size: u32,
    pub add_special_tokens: bool,
    pub parse_special: bool,
}

#[repr(C)]
pub struct photon_request_params {
    pub struct_size: u32,
    pub temperature: f32,
    pub top_k: i32,
    pub top_p: f32,
    pub min_p: f32,
    pub repetition_penalty: f32,
    pub presence_penalty: f32,
    pub frequency_penalty: f32,
    pub use_seed: bool,
    pub seed: u64,
    pub max_tokens: i32,
    pub ignore_eos: bool,
    pub stop_token_ids: *const i32,
    pub num_stop_token_ids: usize,
    pub stop_strings: *const photon_str,
    pub num_stop_strings: usize,
    pub num_top_logprobs: i32,
    pub detokenize: bool,
    pub skip_special_tokens: bool,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct photon_event {
    pub request_id: u64,
    pub token_id: i32,
    pub logprob: f32,
    pub finish_reason: photon_finish_reason,
    pub text_offset: usize,
    pub text_len: usize,
    pub top_logprobs_offset: usize,
    pub num_top_logprobs: usize,
    pub error_offset: usize,
    pub error_len: usize,
    pub stop_string_index: i32,
}

#[repr(C)]
pub struct photon_token_logprob {
    pub token_id: i32,
    pub logprob: f32,
}

extern "C" {
    pub fn photon_status_string(status: photon_status) -> *const c_char;
    pub fn photon_last_error_message() -> *const c_char;
    pub fn photon_version_string() -> *const c_char;

    pub fn photon_engine_params_init(params: *mut photon_engine_params, struct_size: usize) -> photon_status;
    pub fn photon_request_params_init(params: *mut photon_request_params, struct_size: usize) -> photon_status;

    pub fn photon_engine_open(
        out_engine: *mut *mut photon_engine,
        model_dir: *const c_char,
        params: *const photon_engine_params,
    ) -> photon_status;
    pub fn photon_engine_destroy(engine: *mut photon_engine);
    pub fn photon_engine_submit_text(
        out_request_id: *mut u64,
        engine: *mut photon_engine,
        prompt: *const c_char,
        prompt_len: usize,
        tokenize_params: *const photon_tokenize_params,
        params: *const photon_request_params,
    ) -> photon_status;
    pub fn photon_engine_step(out_stats: *mut std::ffi::c_void, engine: *mut photon_engine) -> photon_status;
    pub fn photon_engine_poll(
        out_num_events: *mut usize,
        engine: *mut photon_engine,
        events: *mut photon_event,
        event_size: usize,
        max_events: usize,
        text: *mut c_char,
        text_capacity: usize,
        top_logprobs: *mut photon_token_logprob,
        top_logprobs_capacity: usize,
    ) -> photon_status;
}
