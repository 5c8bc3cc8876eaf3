/* Reads the fields the C tests need from photon's golden JSON files
 * (models/stories260K/golden/<name>.json: "prompt", "prompt_ids",
 * "generated_ids", "full_text"). Not a JSON parser: it finds `"key":` and
 * reads the string or integer array after it, which is all these files use.
 * C99; static inline so each test takes what it needs. */
#ifndef PHOTON_CAPI_GOLDEN_JSON_H
#define PHOTON_CAPI_GOLDEN_JSON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The whole file as a NUL-terminated string (free it), or NULL. */
static inline char* golden_read_file(const char* path) {
  FILE* f = fopen(path, "rb");
  char* buf;
  long n;
  if (f == NULL) return NULL;
  if (fseek(f, 0, SEEK_END) != 0 || (n = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0) {
    fclose(f);
    return NULL;
  }
  buf = (char*)malloc((size_t)n + 1);
  if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  if (buf != NULL) buf[n] = '\0';
  fclose(f);
  return buf;
}

/* The value text right after `"key":` (whitespace skipped), or NULL. */
static inline const char* golden_find(const char* json, const char* key) {
  char pattern[128];
  const char* p;
  snprintf(pattern, sizeof pattern, "\"%s\":", key);
  p = strstr(json, pattern);
  if (p == NULL) return NULL;
  p += strlen(pattern);
  while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t') ++p;
  return p;
}

/* Reads an integer array into out[cap]; returns its length, or -1. */
static inline int golden_int_array(const char* json, const char* key, int32_t* out, int cap) {
  const char* p = golden_find(json, key);
  int n = 0;
  if (p == NULL || *p != '[') return -1;
  ++p;
  for (;;) {
    char* end;
    long v;
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t' || *p == ',') ++p;
    if (*p == ']') return n;
    v = strtol(p, &end, 10);
    if (end == p || n == cap) return -1;
    out[n++] = (int32_t)v;
    p = end;
  }
}

/* Reads a string value (escapes \" \\ \n \t handled; the goldens have raw
 * UTF-8) into out[cap] with a NUL; returns its length, or -1. */
static inline int golden_string(const char* json, const char* key, char* out, int cap) {
  const char* p = golden_find(json, key);
  int n = 0;
  if (p == NULL || *p != '"') return -1;
  ++p;
  while (*p != '"') {
    char c = *p++;
    if (c == '\0') return -1;
    if (c == '\\') {
      c = *p++;
      if (c == 'n') c = '\n';
      else if (c == 't') c = '\t';
      else if (c != '"' && c != '\\' && c != '/') return -1;
    }
    if (n + 1 >= cap) return -1;
    out[n++] = c;
  }
  out[n] = '\0';
  return n;
}

#endif /* PHOTON_CAPI_GOLDEN_JSON_H */
