// A vector of trivially copyable values that keeps its first N elements inline: most ops of a
// training graph have a dependency or two and allocate or free a tensor or two, so their lists
// need no heap allocation (docs/performance.md).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <type_traits>
#include <vector>

namespace racksim {

template <class T, std::size_t N>
class SmallVec {
  static_assert(std::is_trivially_copyable_v<T>, "SmallVec holds trivially copyable values");
  static_assert(N > 0);

 public:
  using value_type = T;
  using iterator = T*;
  using const_iterator = const T*;

  SmallVec() = default;
  SmallVec(std::initializer_list<T> l) { assign(l.begin(), l.end()); }
  SmallVec(const std::vector<T>& v) { assign(v.begin(), v.end()); }  // NOLINT: converts like a vector would
  SmallVec(const SmallVec& o) {
    if (o.cap_) {
      assign(o.begin(), o.end());
      return;
    }
    std::memcpy(inline_, o.inline_, sizeof(inline_));  // (a copy of fixed size, as in take())
    size_ = o.size_;
  }
  SmallVec(SmallVec&& o) noexcept { take(o); }
  ~SmallVec() { release(); }
  SmallVec& operator=(const SmallVec& o) {
    if (this != &o) assign(o.begin(), o.end());
    return *this;
  }
  SmallVec& operator=(SmallVec&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  SmallVec& operator=(std::initializer_list<T> l) {
    assign(l.begin(), l.end());
    return *this;
  }
  SmallVec& operator=(const std::vector<T>& v) {
    assign(v.begin(), v.end());
    return *this;
  }

  template <class It>
  void assign(It first, It last) {
    clear();
    insert(end(), first, last);
  }

  T* data() { return cap_ ? heap_ : inline_; }
  const T* data() const { return cap_ ? heap_ : inline_; }
  std::size_t size() const { return size_; }
  std::size_t capacity() const { return cap_ ? cap_ : N; }
  bool empty() const { return size_ == 0; }
  T* begin() { return data(); }
  T* end() { return data() + size_; }
  const T* begin() const { return data(); }
  const T* end() const { return data() + size_; }
  T& operator[](std::size_t i) { return data()[i]; }
  const T& operator[](std::size_t i) const { return data()[i]; }
  T& front() { return data()[0]; }
  const T& front() const { return data()[0]; }
  T& back() { return data()[size_ - 1]; }
  const T& back() const { return data()[size_ - 1]; }
  void clear() { size_ = 0; }
  void pop_back() { --size_; }

  void push_back(const T& v) {
    if (size_ == capacity()) {
      const T copy = v;  // v may live in this vector
      grow(size_ + 1);
      data()[size_++] = copy;
      return;
    }
    data()[size_++] = v;
  }
  // Inserts [first, last) before pos.
  template <class It>
  T* insert(T* pos, It first, It last) {
    const std::size_t at = static_cast<std::size_t>(pos - data());
    const std::size_t k = static_cast<std::size_t>(std::distance(first, last));
    if (k == 0) return data() + at;
    if (size_ + k > capacity()) {
      std::vector<T> tmp(first, last);  // the range may live in this vector
      grow(size_ + k);
      T* d = data();
      std::memmove(d + at + k, d + at, (size_ - at) * sizeof(T));
      std::copy(tmp.begin(), tmp.end(), d + at);
    } else {
      T* d = data();
      std::memmove(d + at + k, d + at, (size_ - at) * sizeof(T));
      std::copy(first, last, d + at);
    }
    size_ += static_cast<uint32_t>(k);
    return data() + at;
  }
  friend bool operator==(const SmallVec& a, const SmallVec& b) {
    return a.size_ == b.size_ && std::equal(a.begin(), a.end(), b.begin());
  }

 private:
  void grow(std::size_t need) {
    const std::size_t cap = std::max<std::size_t>(need, 2 * capacity());
    T* p = static_cast<T*>(::operator new(cap * sizeof(T)));
    std::memcpy(p, data(), size_ * sizeof(T));
    release();
    heap_ = p;
    cap_ = static_cast<uint32_t>(cap);
  }
  void release() {
    if (cap_) ::operator delete(heap_);
    cap_ = 0;
  }
  void take(SmallVec& o) {
    size_ = o.size_;
    if (o.cap_) {
      heap_ = o.heap_;
      cap_ = o.cap_;
      o.cap_ = 0;
    } else {
      cap_ = 0;
      // The whole buffer: a copy of fixed size is a few moves, where one of size_ elements was a
      // call to memcpy (an op's move, three of these, cost more than building the op).
      std::memcpy(inline_, o.inline_, sizeof(inline_));
    }
    o.size_ = 0;
  }

  // The heap block and the inline elements share their bytes (cap_ says which is live): an op's
  // three lists take 64 bytes, not 88 (docs/decisions.md, "A smaller Op").
  union {
    T* heap_;
    T inline_[N]{};
  };
  uint32_t size_ = 0;
  uint32_t cap_ = 0;  // 0: the elements are inline
};

}  // namespace racksim
