#pragma once
// Byte-level writer and reader for the stage cache's value serialization: little-endian plain
// values, strings and vectors of trivially copyable elements. The reader checks every length
// against what is left and throws CacheFormatError instead of reading past the end.

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace gen3d::pipeline {

// A cache entry whose bytes do not decode (truncated, corrupted, written by another version).
class CacheFormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ByteWriter {
 public:
  // Large arrays referenced instead of copied: the logical stream is `out` with each borrowed
  // range inserted at its offset. The referenced data must outlive the writer's use of `out`.
  struct Borrowed {
    size_t at;  // offset in `out` where the range goes
    std::string_view bytes;
  };
  explicit ByteWriter(std::string& out, std::vector<Borrowed>* borrowed = nullptr)
      : out_(out), borrowed_(borrowed) {}

  template <class T>
  void pod(const T& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    const auto* p = reinterpret_cast<const char*>(&v);
    out_.append(p, sizeof(T));
  }
  void u8(uint8_t v) { pod(v); }
  void u32(uint32_t v) { pod(v); }
  void u64(uint64_t v) { pod(v); }
  void i64(int64_t v) { pod(v); }
  void f64(double v) { pod(v); }
  void boolean(bool v) { u8(v ? 1 : 0); }
  void str(std::string_view s) {
    u64(s.size());
    out_.append(s.data(), s.size());
  }
  template <class T, class A>
  void vec(const std::vector<T, A>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    u64(v.size());
    raw(v.data(), v.size() * sizeof(T));
  }
  // A vector that does not outlive the call (a temporary): always copied, never borrowed.
  template <class T, class A>
  void vec_copied(const std::vector<T, A>& v) {
    static_assert(std::is_trivially_copyable_v<T>);
    u64(v.size());
    if (!v.empty()) out_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  void raw(const void* data, size_t size) {
    if (borrowed_ && size >= (64u << 10)) {
      borrowed_->push_back(Borrowed{out_.size(), {static_cast<const char*>(data), size}});
      borrowed_bytes_ += size;
      return;
    }
    if (size) out_.append(static_cast<const char*>(data), size);
  }
  // Bytes written so far, borrowed ranges included.
  size_t size() const { return out_.size() + borrowed_bytes_; }

 private:
  std::string& out_;
  std::vector<Borrowed>* borrowed_ = nullptr;
  size_t borrowed_bytes_ = 0;
};

class ByteReader {
 public:
  explicit ByteReader(std::string_view bytes)
      : p_(bytes.data()), end_(bytes.data() + bytes.size()) {}

  template <class T>
  T pod() {
    static_assert(std::is_trivially_copyable_v<T>);
    need(sizeof(T));
    T v;
    std::memcpy(&v, p_, sizeof(T));
    p_ += sizeof(T);
    return v;
  }
  uint8_t u8() { return pod<uint8_t>(); }
  uint32_t u32() { return pod<uint32_t>(); }
  uint64_t u64() { return pod<uint64_t>(); }
  int64_t i64() { return pod<int64_t>(); }
  double f64() { return pod<double>(); }
  bool boolean() {
    const uint8_t b = u8();
    if (b > 1) throw CacheFormatError("bad boolean");
    return b == 1;
  }
  std::string str() {
    const uint64_t n = u64();
    need(n);
    std::string s(p_, static_cast<size_t>(n));
    p_ += n;
    return s;
  }
  template <class T, class A = std::allocator<T>>
  std::vector<T, A> vec() {
    static_assert(std::is_trivially_copyable_v<T>);
    const uint64_t n = u64();
    if (n > remaining() / (sizeof(T) ? sizeof(T) : 1)) throw CacheFormatError("truncated vector");
    std::vector<T, A> v(static_cast<size_t>(n));
    if (n) std::memcpy(v.data(), p_, static_cast<size_t>(n) * sizeof(T));
    p_ += n * sizeof(T);
    return v;
  }
  void raw(void* data, size_t size) {
    need(size);
    if (size) std::memcpy(data, p_, size);
    p_ += size;
  }
  void skip(uint64_t n) {
    need(n);
    p_ += n;
  }
  size_t remaining() const { return static_cast<size_t>(end_ - p_); }
  void expect_end() const {
    if (p_ != end_) throw CacheFormatError("trailing bytes");
  }

 private:
  void need(uint64_t n) const {
    if (n > remaining()) throw CacheFormatError("truncated");
  }
  const char* p_;
  const char* end_;
};

}  // namespace gen3d::pipeline
