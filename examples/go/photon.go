// A small Go binding of photon's C ABI through cgo: an Engine type that owns
// a photon_engine, with Submit, Step and Poll. Text crosses as (pointer,
// length), so Go strings need no NUL; events are polled into Go-owned
// buffers that hold no Go pointers (photon writes offsets, not pointers).
package main

/*
#cgo pkg-config: photon
#include <stdlib.h>
#include <photon/photon.h>
*/
import "C"

import (
	"fmt"
	"unsafe"
)

// Error is a photon status with the calling thread's message. cgo calls may
// move between OS threads, so the message is read right after the failing
// call, on the same locked goroutine stack (see Engine methods).
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string { return fmt.Sprintf("%s: %s", e.Name(), e.Message) }

// Name is the status's name ("invalid_argument", ...).
func (e *Error) Name() string { return C.GoString(C.photon_status_string(C.photon_status(e.Status))) }

func check(st C.photon_status) error {
	if st == C.PHOTON_OK {
		return nil
	}
	return &Error{Status: int(st), Message: C.GoString(C.photon_last_error_message())}
}

// Engine owns a photon_engine. Not safe for concurrent Close; Submit and Poll
// may be called from any goroutine (photon's threading rules), Step from one.
type Engine struct {
	ptr *C.photon_engine
}

// Event is one streamed event with its text copied into Go memory.
type Event struct {
	RequestID uint64
	TokenID   int32
	Finish    int // photon_finish_reason; 0 while the request runs
	Text      string
}

// OpenCPU opens a model folder on the CPU backend with a KV cache of kvBlocks blocks.
func OpenCPU(modelDir string, kvBlocks int32) (*Engine, error) {
	var params C.photon_engine_params
	if err := check(C.photon_engine_params_init(&params, C.size_t(unsafe.Sizeof(params)))); err != nil {
		return nil, err
	}
	params.backend = C.PHOTON_BACKEND_CPU
	params.kv_blocks = C.int32_t(kvBlocks)
	dir := C.CString(modelDir)
	defer C.free(unsafe.Pointer(dir))
	var e *C.photon_engine
	if err := withLockedThread(func() error { return check(C.photon_engine_open(&e, dir, &params)) }); err != nil {
		return nil, err
	}
	return &Engine{ptr: e}, nil
}

// Close frees the engine (photon_engine_destroy accepts NULL, so twice is harmless here).
func (e *Engine) Close() {
	C.photon_engine_destroy(e.ptr)
	e.ptr = nil
}

// SubmitGreedy submits a text prompt for at most maxTokens greedy tokens.
func (e *Engine) SubmitGreedy(prompt string, maxTokens int32) (uint64, error) {
	var params C.photon_request_params
	if err := check(C.photon_request_params_init(&params, C.size_t(unsafe.Sizeof(params)))); err != nil {
		return 0, err
	}
	params.temperature = 0
	params.max_tokens = C.int32_t(maxTokens)
	text := C.CString(prompt) // C memory: photon only borrows it during the call
	defer C.free(unsafe.Pointer(text))
	var id C.uint64_t
	err := withLockedThread(func() error {
		return check(C.photon_engine_submit_text(&id, e.ptr, text, C.size_t(len(prompt)), nil, &params))
	})
	return uint64(id), err
}

// Step runs one engine iteration on the calling goroutine.
func (e *Engine) Step() error {
	return withLockedThread(func() error { return check(C.photon_engine_step(nil, e.ptr)) })
}

// Poll drains up to 32 pending events.
func (e *Engine) Poll() ([]Event, error) {
	var events [32]C.photon_event
	text := make([]byte, 8192)
	var n C.size_t
	err := withLockedThread(func() error {
		return check(C.photon_engine_poll(&n, e.ptr, &events[0], C.size_t(unsafe.Sizeof(events[0])), C.size_t(len(events)),
			(*C.char)(unsafe.Pointer(&text[0])), C.size_t(len(text)), nil, 0))
	})
	if err != nil {
		return nil, err
	}
	out := make([]Event, 0, int(n))
	for _, ev := range events[:n] {
		off, l := int(ev.text_offset), int(ev.text_len)
		out = append(out, Event{
			RequestID: uint64(ev.request_id),
			TokenID:   int32(ev.token_id),
			Finish:    int(ev.finish_reason),
			Text:      string(text[off : off+l]),
		})
	}
	return out, nil
}
