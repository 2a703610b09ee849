// Tiny JSON value and writer for racksim-bench (no dependency beyond the standard library).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace rb {

class Json {
 public:
  enum class Type { Null, Bool, Int, Num, Str, Arr, Obj };

  Json() = default;
  Json(bool b) : t_(Type::Bool), b_(b) {}  // NOLINT(google-explicit-constructor)
  template <class T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>, int> = 0>
  Json(T v) : t_(Type::Int), i_(static_cast<long long>(v)) {}  // NOLINT
  template <class T, std::enable_if_t<std::is_floating_point_v<T>, int> = 0>
  Json(T v) : t_(Type::Num), d_(static_cast<double>(v)) {}  // NOLINT
  Json(const char* s) : t_(Type::Str), s_(s ? s : "") {}  // NOLINT
  Json(std::string s) : t_(Type::Str), s_(std::move(s)) {}  // NOLINT

  static Json array() {
    Json j;
    j.t_ = Type::Arr;
    return j;
  }
  static Json object() {
    Json j;
    j.t_ = Type::Obj;
    return j;
  }

  Type type() const { return t_; }
  bool is_null() const { return t_ == Type::Null; }

  // Object access: inserts a null member when the key is missing (keeps insertion order).
  Json& operator[](const std::string& key) {
    if (t_ == Type::Null) t_ = Type::Obj;
    for (auto& kv : o_)
      if (kv.first == key) return kv.second;
    o_.emplace_back(key, Json());
    return o_.back().second;
  }
  const Json* find(const std::string& key) const {
    for (auto& kv : o_)
      if (kv.first == key) return &kv.second;
    return nullptr;
  }
  void push(Json v) {
    if (t_ == Type::Null) t_ = Type::Arr;
    a_.push_back(std::move(v));
  }
  size_t size() const { return t_ == Type::Arr ? a_.size() : o_.size(); }

  std::string dump(int indent = 1) const {
    std::string out;
    write(out, indent, 0);
    out.push_back('\n');
    return out;
  }

 private:
  static void escape(std::string& out, const std::string& s) {
    out.push_back('"');
    for (unsigned char c : s) {
      switch (c) {
        case '"': out += "\\\""; break;
        case '\\': out += "\\\\"; break;
        case '\n': out += "\\n"; break;
        case '\r': out += "\\r"; break;
        case '\t': out += "\\t"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            out += buf;
          } else {
            out.push_back(static_cast<char>(c));
          }
      }
    }
    out.push_back('"');
  }
  static void newline(std::string& out, int indent, int depth) {
    if (indent <= 0) return;
    out.push_back('\n');
    out.append(static_cast<size_t>(indent * depth), ' ');
  }
  void write(std::string& out, int indent, int depth) const {
    char buf[64];
    switch (t_) {
      case Type::Null: out += "null"; break;
      case Type::Bool: out += b_ ? "true" : "false"; break;
      case Type::Int:
        std::snprintf(buf, sizeof buf, "%lld", i_);
        out += buf;
        break;
      case Type::Num:
        if (!std::isfinite(d_)) {
          out += "null";
        } else {
          std::snprintf(buf, sizeof buf, "%.10g", d_);
          out += buf;
        }
        break;
      case Type::Str: escape(out, s_); break;
      case Type::Arr: {
        // Arrays of scalars stay on one line; arrays of containers get one element per line.
        bool flat = true;
        for (auto& v : a_)
          if (v.t_ == Type::Arr || v.t_ == Type::Obj) flat = false;
        out.push_back('[');
        for (size_t i = 0; i < a_.size(); ++i) {
          if (i) out += flat ? ", " : ",";
          if (!flat) newline(out, indent, depth + 1);
          a_[i].write(out, indent, depth + 1);
        }
        if (!flat && !a_.empty()) newline(out, indent, depth);
        out.push_back(']');
        break;
      }
      case Type::Obj: {
        out.push_back('{');
        for (size_t i = 0; i < o_.size(); ++i) {
          if (i) out.push_back(',');
          newline(out, indent, depth + 1);
          escape(out, o_[i].first);
          out += indent > 0 ? ": " : ":";
          o_[i].second.write(out, indent, depth + 1);
        }
        if (!o_.empty()) newline(out, indent, depth);
        out.push_back('}');
        break;
      }
    }
  }

  Type t_ = Type::Null;
  bool b_ = false;
  long long i_ = 0;
  double d_ = 0.0;
  std::string s_;
  std::vector<Json> a_;
  std::vector<std::pair<std::string, Json>> o_;
};

}  // namespace rb
