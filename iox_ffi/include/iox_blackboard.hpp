// Blackboards from C++, header-only over iox.hpp: the latest value of each of a fixed
// set of integer keys, shared with Rust (`blackboard::<K>()`), Python
// (`iox.Service(name).blackboard(dtype)`) and C programs of the same key and value types.
//
//   auto board = iox::Blackboard<std::uint32_t>::named("examples/robot")
//                    .add<double>(0, 0.0)                            // key 0: speed
//                    .add<std::array<float, 3>>(1, {0, 0, 0})        // key 1: [f32; 3]
//                    .open_or_create();
//   auto writer = board->writer();
//   writer->update<double>(0, 1.5);
//   auto reader = board->reader();
//   double speed = reader->get<double>(0).value();
//
// - Keys: one of the integer types (`std::uint8_t` ... `std::int64_t`), as Rust's.
// - Values: a type with an `iox::TypeName` (numbers, structs named as for payloads),
//   or a `std::array` of one (`[f32; 3]` in Rust). A key added with `add<V>` is checked
//   against the blackboard's recorded type on open, and `get<W>` / `update<W>` of it
//   with another `W` is refused; a key not added is checked by size only.
// - Values are copied out and in; readers never see a torn value and never block a
//   writer (the Rust blackboard's protocol). `listener()` wakes on changes (event id
//   `i` for the `i`-th of `keys()`).
// - Readers and writers are ports: use each from the thread that made it.
#ifndef IOX_BLACKBOARD_HPP
#define IOX_BLACKBOARD_HPP

#include <array>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "iox.hpp"

namespace iox {

/// The C code of blackboard key type `K`.
template <class K>
struct KeyTypeCode;
#define IOX_KEY_CODE(T, CODE)                           \
    template <>                                         \
    struct KeyTypeCode<T> {                             \
        static constexpr std::uint32_t value = CODE;    \
    };
IOX_KEY_CODE(std::uint8_t, IOX_KEY_U8)
IOX_KEY_CODE(std::uint16_t, IOX_KEY_U16)
IOX_KEY_CODE(std::uint32_t, IOX_KEY_U32)
IOX_KEY_CODE(std::uint64_t, IOX_KEY_U64)
IOX_KEY_CODE(std::int8_t, IOX_KEY_I8)
IOX_KEY_CODE(std::int16_t, IOX_KEY_I16)
IOX_KEY_CODE(std::int32_t, IOX_KEY_I32)
IOX_KEY_CODE(std::int64_t, IOX_KEY_I64)
#undef IOX_KEY_CODE

/// The Rust name of a blackboard value type: `TypeName<V>`, or `[E; N]` for a
/// `std::array<E, N>`.
template <class V>
struct ValueName {
    static std::string get() { return TypeName<V>::value; }
};
template <class E, std::size_t N>
struct ValueName<std::array<E, N>> {
    static std::string get() { return "[" + ValueName<E>::get() + "; " + std::to_string(N) + "]"; }
};

/// Whether every bit pattern of a blackboard value type is a value (as `AnyBitPattern`).
template <class V>
struct ValueAnyBits : AnyBitPattern<V> {};
template <class E, std::size_t N>
struct ValueAnyBits<std::array<E, N>> : ValueAnyBits<E> {};

namespace detail {

/// A key as the C API takes it (signed keys as their two's complement).
template <class K>
std::uint64_t key_bits(K key) {
    static_assert(std::is_integral_v<K> && !std::is_same_v<K, bool>, "blackboard keys are integers");
    return static_cast<std::uint64_t>(static_cast<std::conditional_t<std::is_signed_v<K>, std::int64_t, std::uint64_t>>(key));
}

/// The types the program declared per key (`add<V>`), by key.
using Declared = std::map<std::uint64_t, std::string>;

/// Refuses `V` for `key` when the program declared another type for it.
inline std::optional<Error> check_declared(const Declared& declared, std::uint64_t key, const std::string& name) {
    auto it = declared.find(key);
    if (it == declared.end() || it->second == name) return std::nullopt;
    return Error{IOX_STATUS_INVALID_ARGUMENT,
                 "this program added key " + std::to_string(key) + " as " + it->second + ", not " + name};
}

}  // namespace detail

template <class K>
class Blackboard;

/// Reads a blackboard's values (use it from its thread).
template <class K>
class BlackboardReader {
public:
    BlackboardReader(BlackboardReader&& o) noexcept
        : port_(std::exchange(o.port_, nullptr)), declared_(std::move(o.declared_)) {}
    BlackboardReader(const BlackboardReader&) = delete;
    BlackboardReader& operator=(const BlackboardReader&) = delete;
    BlackboardReader& operator=(BlackboardReader&&) = delete;
    ~BlackboardReader() {
        if (port_ != nullptr) iox_blackboard_reader_drop(port_);
    }

    /// A copy of `key`'s latest value.
    template <class V>
    Result<V> get(K key) const {
        static_assert(std::is_trivially_copyable_v<V>, "blackboard values are trivially copyable");
        if (auto e = detail::check_declared(*declared_, detail::key_bits(key), ValueName<V>::get())) return *e;
        V value{};
        IoxStatus s = iox_blackboard_reader_get(port_, detail::key_bits(key), &value, sizeof(V), nullptr);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return value;
    }

    /// (`key`'s generation now, whether it changed since this reader last read it).
    Result<std::pair<std::uint64_t, bool>> generation(K key) const {
        std::uint64_t g = 0;
        bool changed = false;
        IoxStatus s = iox_blackboard_reader_generation(port_, detail::key_bits(key), &g, &changed);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return std::make_pair(g, changed);
    }

private:
    friend class Blackboard<K>;
    BlackboardReader(IoxBlackboardReader* port, std::shared_ptr<const detail::Declared> declared)
        : port_(port), declared_(std::move(declared)) {}
    IoxBlackboardReader* port_;
    std::shared_ptr<const detail::Declared> declared_;
};

/// Updates a blackboard's values (use it from its thread; at most `max_writers`).
template <class K>
class BlackboardWriter {
public:
    BlackboardWriter(BlackboardWriter&& o) noexcept
        : port_(std::exchange(o.port_, nullptr)), declared_(std::move(o.declared_)) {}
    BlackboardWriter(const BlackboardWriter&) = delete;
    BlackboardWriter& operator=(const BlackboardWriter&) = delete;
    BlackboardWriter& operator=(BlackboardWriter&&) = delete;
    ~BlackboardWriter() {
        if (port_ != nullptr) iox_blackboard_writer_drop(port_);
    }

    /// Sets `key`'s value; the generation published.
    template <class V>
    Result<std::uint64_t> update(K key, const V& value) const {
        static_assert(std::is_trivially_copyable_v<V>, "blackboard values are trivially copyable");
        if (auto e = detail::check_declared(*declared_, detail::key_bits(key), ValueName<V>::get())) return *e;
        std::uint64_t g = 0;
        IoxStatus s = iox_blackboard_writer_update(port_, detail::key_bits(key), &value, sizeof(V), &g);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return g;
    }

private:
    friend class Blackboard<K>;
    BlackboardWriter(IoxBlackboardWriter* port, std::shared_ptr<const detail::Declared> declared)
        : port_(port), declared_(std::move(declared)) {}
    IoxBlackboardWriter* port_;
    std::shared_ptr<const detail::Declared> declared_;
};

/// A blackboard with keys of integer type `K` (any thread).
template <class K>
class Blackboard {
public:
    /// The keys, value types and settings of a blackboard to open or create.
    class Builder {
    public:
        explicit Builder(std::string name) : name_(std::move(name)) {}

        /// Adds `key` with values of `V`, starting at `initial` when creating; when
        /// opening, the blackboard must have `key` with values of `V`.
        template <class V>
        Builder& add(K key, const V& initial) {
            static_assert(std::is_trivially_copyable_v<V> && std::is_standard_layout_v<V>,
                          "blackboard values are trivially copyable standard-layout types");
            Entry e;
            e.key = detail::key_bits(key);
            e.name = ValueName<V>::get();
            e.size = sizeof(V);
            e.alignment = alignof(V);
            e.any_bits = ValueAnyBits<V>::value;
            e.initial.resize(sizeof(V));
            std::memcpy(e.initial.data(), &initial, sizeof(V));
            entries_.push_back(std::move(e));
            return *this;
        }
        Builder& root(std::string dir) { return root_ = std::move(dir), *this; }
        Builder& max_writers(std::uint32_t n) { return max_writers_ = n, *this; }
        Builder& max_readers(std::uint32_t n) { return max_readers_ = n, *this; }
        Builder& max_listeners(std::uint32_t n) { return max_listeners_ = n, *this; }
        Builder& attribute(std::string key, std::string value) {
            return attributes_.emplace_back(std::move(key), std::move(value)), *this;
        }
        Builder& require_attribute(std::string key, std::optional<std::string> value) {
            return required_.emplace_back(std::move(key), std::move(value)), *this;
        }

        Result<Blackboard> open_or_create() const { return open(IOX_OPEN_OR_CREATE); }
        Result<Blackboard> open_existing() const { return open(IOX_OPEN); }
        Result<Blackboard> create() const { return open(IOX_CREATE); }

    private:
        struct Entry {
            std::uint64_t key;
            std::string name;
            std::uint64_t size;
            std::uint64_t alignment;
            bool any_bits;
            std::vector<unsigned char> initial;
        };

        Result<Blackboard> open(std::uint32_t mode) const {
            IoxBlackboardOptions opts;
            iox_blackboard_options_init(&opts);
            opts.root = root_.empty() ? nullptr : root_.c_str();
            opts.key_type = KeyTypeCode<K>::value;
            opts.max_writers = max_writers_;
            opts.max_readers = max_readers_;
            opts.max_listeners = max_listeners_;
            std::vector<IoxBlackboardEntry> entries;
            auto declared = std::make_shared<detail::Declared>();
            for (const Entry& e : entries_) {
                IoxBlackboardEntry c{};
                c.key = e.key;
                c.value.name = e.name.c_str();
                c.value.size = e.size;
                c.value.alignment = e.alignment;
                c.value.any_bit_pattern = e.any_bits;
                c.initial = e.initial.data();
                entries.push_back(c);
                (*declared)[e.key] = e.name;
            }
            opts.entries = entries.data();
            opts.entry_count = entries.size();
            detail::AttributeArrays arrays(attributes_, required_);
            arrays.fill(opts);
            IoxBlackboard* board = nullptr;
            IoxStatus s = iox_blackboard_open(name_.c_str(), mode, &opts, &board);
            if (s != IOX_STATUS_OK) return Error::last(s);
            return Blackboard(board, std::move(declared));
        }

        std::string name_;
        std::string root_;
        std::vector<Entry> entries_;
        std::uint32_t max_writers_ = 0, max_readers_ = 0, max_listeners_ = 0;
        std::vector<Attribute> attributes_;
        std::vector<RequiredAttribute> required_;
    };

    /// A builder of blackboard `name`.
    static Builder named(std::string name) { return Builder(std::move(name)); }

    Blackboard(Blackboard&& o) noexcept : board_(std::exchange(o.board_, nullptr)), declared_(std::move(o.declared_)) {}
    Blackboard(const Blackboard&) = delete;
    Blackboard& operator=(const Blackboard&) = delete;
    Blackboard& operator=(Blackboard&&) = delete;
    ~Blackboard() {
        if (board_ != nullptr) iox_blackboard_drop(board_);
    }

    /// A reader (owned by the calling thread).
    Result<BlackboardReader<K>> reader() const {
        IoxBlackboardReader* r = nullptr;
        IoxStatus s = iox_blackboard_reader_create(board_, &r);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return BlackboardReader<K>(r, declared_);
    }
    /// A writer (owned by the calling thread).
    Result<BlackboardWriter<K>> writer() const {
        IoxBlackboardWriter* w = nullptr;
        IoxStatus s = iox_blackboard_writer_create(board_, &w);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return BlackboardWriter<K>(w, declared_);
    }
    /// A listener of changes: event id `i` when the `i`-th of `keys()` is updated.
    Result<Listener> listener() const {
        IoxListener* l = nullptr;
        IoxStatus s = iox_blackboard_listener_create(board_, &l);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return Listener(l);
    }
    /// The keys, in the order of their change event ids.
    Result<std::vector<K>> keys() const {
        std::size_t n = 0;
        IoxStatus s = iox_blackboard_key_count(board_, &n);
        if (s != IOX_STATUS_OK) return Error::last(s);
        std::vector<K> out;
        for (std::size_t i = 0; i < n; i++) {
            std::uint64_t bits = 0;
            s = iox_blackboard_key(board_, i, &bits, nullptr);
            if (s != IOX_STATUS_OK) return Error::last(s);
            out.push_back(static_cast<K>(bits));
        }
        return out;
    }

private:
    Blackboard(IoxBlackboard* board, std::shared_ptr<const detail::Declared> declared)
        : board_(board), declared_(std::move(declared)) {}
    IoxBlackboard* board_;
    std::shared_ptr<const detail::Declared> declared_;
};

}  // namespace iox

#endif  // IOX_BLACKBOARD_HPP
