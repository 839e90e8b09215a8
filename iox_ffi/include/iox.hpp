// The C++17 layer of iox: RAII types over the C API (iox.h), header-only.
//
//   struct Reading { std::uint64_t seq; double value; };
//   template <> struct iox::TypeName<Reading> { static constexpr const char* value = "Reading"; };
//
//   auto service = iox::PubSub<Reading>::open_or_create("examples/readings");
//   if (!service) { std::fprintf(stderr, "%s\n", service.error().message.c_str()); return 1; }
//   auto publisher = service->publisher();
//   auto loan = publisher->loan();
//   *loan.value() = Reading{1, 0.5};
//   auto delivered = std::move(loan.value()).send();
//
// Payload types are trivially copyable standard-layout types with a name
// (`iox::TypeName<T>`, the name a Rust program gives the same struct with
// `#[iox(type_name = "...")]`). Whether every bit pattern is a value is
// `iox::AnyBitPattern<T>` (see there: a struct with floating-point fields specialises
// it). A service may carry a per-sample user header `H` beside the payload
// (`iox::PubSub<T, H>`: a frame's stamp and size in front of its pixels; the header is a
// payload-like type with its own `TypeName`), written with `loan.header()` and read
// with `sample.header()`. Results are `iox::Result<T>`: a
// value or an `iox::Error` (status and message), no exceptions. Ports, loans and
// samples are move-only; a loan or sample must not outlive its port (the port's drop
// ends them, as in C).
#ifndef IOX_HPP
#define IOX_HPP

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "iox.h"

/// One field of a type for `IOX_FIELDS`: its name, `offsetof` and type, from the struct.
#define IOX_FIELD(T, f) ::iox::field<decltype(T::f)>(#f, offsetof(T, f))

/// Declares the fields of `T` (each an `IOX_FIELD(T, name)`, in order): see `iox::Fields`.
/// Use at global scope, after `T` and its `TypeName`.
#define IOX_FIELDS(T, ...)                                                                   \
    template <>                                                                              \
    struct iox::Fields<T> {                                                                  \
        static constexpr ::iox::FieldDecl decl[] = {__VA_ARGS__};                            \
        static constexpr std::size_t count = sizeof(decl) / sizeof(decl[0]);                 \
        static constexpr std::array<IoxField, count> list =                                  \
            ::iox::c_fields(decl, std::make_index_sequence<count>{});                        \
    };

namespace iox {

/// The name a payload type is recorded under; specialise it for each payload type.
template <class T>
struct TypeName;

/// Whether every bit pattern of `T` is a value (part of the service's identity, as the
/// Rust derive records it). The default holds for integers, floats and structs of
/// integers without padding; specialise it to `true` for a struct with floating-point
/// fields and no padding, `false` for one with `bool` or enum fields.
template <class T>
struct AnyBitPattern : std::bool_constant<std::is_floating_point_v<T> ||
                                          (std::has_unique_object_representations_v<T> && !std::is_same_v<T, bool>)> {};

/// Numbers carry the names Rust gives them, so `PubSub<std::uint64_t>` and a Rust
/// `u64` service are one service.
#define IOX_NUMBER_NAME(T, NAME)                          \
    template <>                                           \
    struct TypeName<T> {                                  \
        static constexpr const char* value = NAME;        \
    };
IOX_NUMBER_NAME(std::uint8_t, "u8")
IOX_NUMBER_NAME(std::uint16_t, "u16")
IOX_NUMBER_NAME(std::uint32_t, "u32")
IOX_NUMBER_NAME(std::uint64_t, "u64")
IOX_NUMBER_NAME(std::int8_t, "i8")
IOX_NUMBER_NAME(std::int16_t, "i16")
IOX_NUMBER_NAME(std::int32_t, "i32")
IOX_NUMBER_NAME(std::int64_t, "i64")
IOX_NUMBER_NAME(float, "f32")
IOX_NUMBER_NAME(double, "f64")
#undef IOX_NUMBER_NAME

/// What a payload type `T` is made of: one value of `T`, or (`T` = `E[]`) a slice of
/// `E`s whose length each loan chooses.
template <class T>
struct Payload {
    using Element = T;
    static constexpr bool slice = false;
};
template <class E>
struct Payload<E[]> {
    using Element = E;
    static constexpr bool slice = true;
};

/// The fields of `T`, declared once with `IOX_FIELDS` so that every language reads what
/// this program writes by field name (Python without a dtype, `iox echo`, a Rust
/// program's derived struct) and an opener whose fields differ is refused naming the
/// first one that does:
///
///   struct FrameHeader { std::uint64_t seq; std::uint64_t stamp_ns; std::uint32_t width, height; };
///   template <> struct iox::TypeName<FrameHeader> { static constexpr const char* value = "FrameHeader"; };
///   IOX_FIELDS(FrameHeader, IOX_FIELD(FrameHeader, seq), IOX_FIELD(FrameHeader, stamp_ns),
///              IOX_FIELD(FrameHeader, width), IOX_FIELD(FrameHeader, height))
///
/// A field is a number, `bool`, a one-dimensional array of them, or a struct (or array
/// of structs) with its own `TypeName` and `IOX_FIELDS`. Checked at compile time: the
/// fields are in order and do not overlap (their `offsetof` and `sizeof`), and a type
/// whose every bit pattern is a value (`AnyBitPattern`) has every byte in a field (list
/// every field; padding as explicit `_pad` fields). Without `IOX_FIELDS` a type records
/// no layout (numbers record their own).
template <class T>
struct Fields {
    static constexpr std::size_t count = 0;
};

/// One declared field, its size, and whether every bit pattern of it is a value (no
/// `bool` in it, no byte of it in no field).
struct FieldDecl {
    IoxField field;
    std::size_t size;
    bool any_bit_pattern;
};

template <class T>
constexpr bool fields_cover();

template <class T>
constexpr IoxType describe();

/// The C description of `T` with its fields, one per type (what a nested field points to).
template <class T>
struct Described {
    static constexpr IoxType value = describe<T>();
};

/// `IOX_FIELD`'s work: field `name` of type `F` at `offset`.
template <class F>
constexpr FieldDecl field(const char* name, std::size_t offset) {
    static_assert(std::rank_v<F> <= 1, "iox fields: arrays of one dimension only");
    static_assert(std::rank_v<F> == 0 || std::extent_v<F> > 0, "iox fields: an array has at least one element");
    using E = std::remove_extent_t<F>;
    IoxField f{};
    f.name = name;
    f.offset = offset;
    f.count = std::rank_v<F> == 1 ? std::extent_v<F> : 0;  // 0: one value
    bool any = true;
    if constexpr (std::is_same_v<E, bool>) {
        f.type_name = "bool";
        any = false;
    } else if constexpr (std::is_arithmetic_v<E>) {
        f.type_name = TypeName<E>::value;
    } else {
        static_assert(std::is_class_v<E>, "iox fields: a field is a number, bool, a struct or an array of one");
        static_assert(Fields<E>::count > 0, "iox fields: a struct field's type needs its own IOX_FIELDS");
        f.nested = &Described<E>::value;
        any = fields_cover<E>();
    }
    return FieldDecl{f, sizeof(F), any};
}

/// The C array of declared fields.
template <std::size_t N, std::size_t... I>
constexpr std::array<IoxField, N> c_fields(const FieldDecl (&d)[N], std::index_sequence<I...>) {
    return {{d[I].field...}};
}

/// Whether `T`'s declared fields are in order, do not overlap and fit.
template <class T>
constexpr bool fields_in_order() {
    std::size_t end = 0;
    for (std::size_t i = 0; i < Fields<T>::count; ++i) {
        const FieldDecl& d = Fields<T>::decl[i];
        if (d.field.offset < end) return false;
        end = d.field.offset + d.size;
    }
    return end <= sizeof(T);
}

/// Whether every byte of `T` is in a declared field and every field's every bit
/// pattern is a value (no `bool`, no padding inside a nested struct).
template <class T>
constexpr bool fields_cover() {
    std::size_t covered = 0;
    for (std::size_t i = 0; i < Fields<T>::count; ++i) {
        const FieldDecl& d = Fields<T>::decl[i];
        if (!d.any_bit_pattern) return false;
        covered += d.size;
    }
    return fields_in_order<T>() && covered == sizeof(T);
}

/// Whether `T`'s declared fields fit it (`fields_in_order`) and, for a type whose every
/// bit pattern is a value, cover it (`fields_cover`).
template <class T>
constexpr bool fields_fit() {
    return fields_in_order<T>() && (!AnyBitPattern<T>::value || fields_cover<T>());
}

/// The C description of type `T` (one value), with its fields if declared.
template <class T>
constexpr IoxType describe() {
    static_assert(std::is_trivially_copyable_v<T> && std::is_standard_layout_v<T>,
                  "iox payloads are trivially copyable standard-layout types");
    IoxType t{};
    t.name = TypeName<T>::value;
    t.size = sizeof(T);
    t.alignment = alignof(T);
    t.any_bit_pattern = AnyBitPattern<T>::value;
    if constexpr (Fields<T>::count > 0) {
        static_assert(fields_fit<T>(),
                      "iox fields: IOX_FIELDS lists fields out of order or overlapping, or a type whose every bit "
                      "pattern is a value (AnyBitPattern) has a byte in no field (list every field; padding as "
                      "_pad) or a bool (use a std::uint8_t flag, or specialise AnyBitPattern false)");
        t.fields = Fields<T>::list.data();
        t.field_count = Fields<T>::count;
    }
    return t;
}

/// The C description of payload type `T` (one value).
template <class T>
IoxType type_of() {
    return describe<T>();
}

/// A failed call: its status and the library's message.
struct Error {
    IoxStatus status;
    std::string message;

    static Error last(IoxStatus status) { return Error{status, iox_last_error()}; }
};

/// A value or an error (std::expected's shape, for C++17). Test it before taking the
/// value: `value()` on an error (or `error()` on a value) throws
/// `std::bad_variant_access` (terminates when built without exceptions); iox itself
/// throws nothing.
template <class T>
class Result {
public:
    Result(T value) : inner_(std::move(value)) {}
    Result(Error error) : inner_(std::move(error)) {}
    /// A value made in place from `args` (no move of it on the way).
    template <class... A>
    explicit Result(std::in_place_t, A&&... args) : inner_(std::in_place_index<0>, std::forward<A>(args)...) {}
    explicit operator bool() const { return inner_.index() == 0; }
    bool has_value() const { return inner_.index() == 0; }
    T& value() & { return std::get<0>(inner_); }
    const T& value() const& { return std::get<0>(inner_); }
    T&& value() && { return std::get<0>(std::move(inner_)); }
    T* operator->() { return &std::get<0>(inner_); }
    const T* operator->() const { return &std::get<0>(inner_); }
    T& operator*() & { return std::get<0>(inner_); }
    const T& operator*() const& { return std::get<0>(inner_); }
    const Error& error() const { return std::get<1>(inner_); }

private:
    std::variant<T, Error> inner_;
};

/// A service attribute: (key, value). See `iox_service::attributes` for the rules.
using Attribute = std::pair<std::string, std::string>;
/// An attribute an opener requires: (key, value), or (key, std::nullopt) for the key
/// with any value.
using RequiredAttribute = std::pair<std::string, std::optional<std::string>>;

namespace detail {

/// The C arrays of an options struct's attributes, pointing into the vectors given
/// (which must outlive it).
class AttributeArrays {
public:
    AttributeArrays(const std::vector<Attribute>& record, const std::vector<RequiredAttribute>& require) {
        for (const auto& a : record) record_.push_back(IoxAttribute{a.first.c_str(), a.second.c_str()});
        for (const auto& r : require)
            require_.push_back(IoxAttribute{r.first.c_str(), r.second ? r.second->c_str() : nullptr});
    }
    /// Points `opts`'s attribute fields at the arrays.
    template <class O>
    void fill(O& opts) const {
        opts.attributes = record_.data();
        opts.attribute_count = record_.size();
        opts.required_attributes = require_.data();
        opts.required_attribute_count = require_.size();
    }

private:
    std::vector<IoxAttribute> record_;
    std::vector<IoxAttribute> require_;
};

/// A service's attributes through its C readers (`count`, `at`), sorted by key.
template <class S>
Result<std::vector<Attribute>> read_attributes(S* service, IoxStatus (*count)(S*, std::size_t*),
                                               IoxStatus (*at)(S*, std::size_t, const char**, const char**)) {
    std::size_t n = 0;
    IoxStatus st = count(service, &n);
    if (st != IOX_STATUS_OK) return Error::last(st);
    std::vector<Attribute> out;
    out.reserve(n);
    for (std::size_t i = 0; i < n; i++) {
        const char* key = nullptr;
        const char* value = nullptr;
        st = at(service, i, &key, &value);
        if (st != IOX_STATUS_OK) return Error::last(st);
        out.emplace_back(key, value);
    }
    return out;
}

/// The value of a service's attribute `key` through its C reader, or std::nullopt.
template <class S>
Result<std::optional<std::string>> read_attribute(S* service, const std::string& key,
                                                  IoxStatus (*get)(S*, const char*, const char**)) {
    const char* value = nullptr;
    IoxStatus st = get(service, key.c_str(), &value);
    if (st != IOX_STATUS_OK) return Error::last(st);
    if (value == nullptr) return std::optional<std::string>();
    return std::optional<std::string>(value);
}

}  // namespace detail
/// Who may publish into a publish-subscribe service and who may only subscribe
/// (`Options::access`; see `IoxAccessPolicy`): the creator (and root) always publish;
/// a reader's pool is read-only, so its `publisher()` fails with
/// `IOX_STATUS_NOT_A_PUBLISHER`; a process it does not name fails to open the service
/// with `IOX_STATUS_NOT_IN_ACCESS_POLICY`. The files' permissions
/// (`Options::permissions`) must still admit every uid it names.
///
///   options.permissions = 0666;
///   options.access = iox::AccessPolicy().publish_uid(1001).read_gid(50);
class AccessPolicy {
public:
    /// Also lets user `uid` publish.
    AccessPolicy& publish_uid(std::uint32_t uid) { return add(publish_uids_, uid); }
    /// Also lets the members of group `gid` publish.
    AccessPolicy& publish_gid(std::uint32_t gid) { return add(publish_gids_, gid); }
    /// Lets user `uid` subscribe without publishing.
    AccessPolicy& read_uid(std::uint32_t uid) { return add(read_uids_, uid); }
    /// Lets the members of group `gid` subscribe without publishing.
    AccessPolicy& read_gid(std::uint32_t gid) { return add(read_gids_, gid); }
    /// When opening, requires the service to have been created by user `uid` (when
    /// creating, this process must be that user).
    AccessPolicy& created_by(std::uint32_t uid) {
        creator_ = uid;
        return *this;
    }

    /// The C view of the lists (valid while this policy lives, unchanged).
    IoxAccessPolicy c() const {
        IoxAccessPolicy p{};
        p.publish_uids = publish_uids_.data();
        p.publish_uid_count = publish_uids_.size();
        p.publish_gids = publish_gids_.data();
        p.publish_gid_count = publish_gids_.size();
        p.read_uids = read_uids_.data();
        p.read_uid_count = read_uids_.size();
        p.read_gids = read_gids_.data();
        p.read_gid_count = read_gids_.size();
        p.created_by = creator_ ? &*creator_ : nullptr;
        return p;
    }

private:
    AccessPolicy& add(std::vector<std::uint32_t>& list, std::uint32_t id) {
        list.push_back(id);
        return *this;
    }
    std::vector<std::uint32_t> publish_uids_, publish_gids_, read_uids_, read_gids_;
    std::optional<std::uint32_t> creator_;
};

/// The pages a publish-subscribe pool lives on (`Options::page_size`; a port's
/// `pool_info()` says which, see `page_size(const IoxPoolInfo&)`): the base pages
/// (4 KiB, the default), reserved 2 MiB or 1 GiB huge pages (hugetlb; creating on too
/// few fails with `IOX_STATUS_NO_HUGE_PAGES`, its message saying how many are needed
/// and how to reserve them), or transparent huge pages (best effort).
///
///   options.page_size = iox::PageSize::Huge2MiB;
enum class PageSize : std::uint32_t {
    Base = IOX_PAGE_SIZE_BASE,
    Huge2MiB = IOX_PAGE_SIZE_HUGE_2MIB,
    Huge1GiB = IOX_PAGE_SIZE_HUGE_1GIB,
    Transparent = IOX_PAGE_SIZE_TRANSPARENT,
};

/// The pages of the pool `info` describes (what `pool_info()` gives; `page_bytes` is
/// their size).
inline PageSize page_size(const IoxPoolInfo& info) { return static_cast<PageSize>(info.page_size); }

/// The user header of a service without one (the default of `PubSub<T, H>`).
struct NoHeader {};

/// Whether `H` is a user header (not `NoHeader`).
template <class H>
inline constexpr bool has_header = !std::is_same_v<H, NoHeader>;

/// Settings of a service beyond its payload type (0: the default).
struct Options {
    const char* root = nullptr;
    /// A slice service (`PubSub<E[]>`): the most elements one sample holds (required
    /// when creating).
    std::uint64_t max_slice_len = 0;
    std::uint32_t max_publishers = 0;
    std::uint32_t max_subscribers = 0;
    std::uint32_t subscriber_buffer = 0;
    std::uint32_t history = 0;
    std::uint32_t max_loans = 0;
    std::uint32_t max_held = 0;
    /// The pool's memory type code (0 CPU, 1 page-locked, 2 CUDA-pinned, 3 GPU device
    /// memory, >= 0x100 users' own); unset: CPU when creating, any when opening.
    std::optional<std::uint32_t> memory_type{};
    /// What a send does when a subscriber's queue is full: IOX_OVERFLOW_DEFAULT (when
    /// creating: drop its oldest sample; when opening: any), IOX_OVERFLOW_DROP_OLDEST or
    /// IOX_OVERFLOW_REJECT (the send is `IOX_STATUS_QUEUE_FULL` for that subscriber).
    std::uint32_t overflow = IOX_OVERFLOW_DEFAULT;
    /// Attributes to record when creating (not compared on open).
    std::vector<Attribute> attributes{};
    /// Attributes an existing service must have when opening (a call that may create
    /// must record them too).
    std::vector<RequiredAttribute> required_attributes{};
    /// A host tensor service (`PubSub<E[]>` of numbers): every sample carries its tensor,
    /// sent by a `TensorPublisher` (see there). Recorded when creating; required when
    /// opening if set.
    bool tensors = false;
    /// Unix permissions of the files when creating (0: the default, 0600; e.g. 0660 for
    /// the group, 0666 for everyone, within which `access` decides). Not compared on open.
    std::uint32_t permissions = 0;
    /// Who may publish and who may only subscribe (see `AccessPolicy`): recorded when
    /// creating (this process's uid the creator); when opening, required if set.
    std::optional<AccessPolicy> access{};
    /// The pages the pool lives on (see `PageSize`); unset: the base pages when
    /// creating, any when opening (set: the service must have them).
    std::optional<PageSize> page_size{};
};

template <class T, class H = NoHeader>
class Publisher;
template <class T, class H = NoHeader>
class Subscriber;
template <class T, class H = NoHeader>
class PubSub;

/// The tag of an empty `Loan` or `Sample` (one made to be filled in place).
struct Spent {};

/// A loaned chunk holding one `T` (and, for a service with a user header, one `H` in
/// front of it), written in place; sent with `send()`, given back unsent when dropped.
/// It holds the loan itself (no table is looked up per call); it is moved, never
/// copied, and is used from the thread that loaned it (sent or dropped on another, it
/// is refused and its chunk stays taken until the process exits).
template <class T, class H = NoHeader>
class Loan {
public:
    /// An empty loan (what a moved-from one is): nothing to send or discard.
    explicit Loan(Spent) noexcept { spend(); }
    // Moves copy the bytes (an empty loan's opaque part is never written).
    Loan(Loan&& o) noexcept {
        std::memcpy(&loan_, &o.loan_, sizeof loan_);
        o.spend();
    }
    Loan& operator=(Loan&& o) noexcept {
        if (this != &o) {
            discard();
            std::memcpy(&loan_, &o.loan_, sizeof loan_);
            o.spend();
        }
        return *this;
    }
    Loan(const Loan&) = delete;
    Loan& operator=(const Loan&) = delete;
    ~Loan() { discard(); }

    using Element = typename Payload<T>::Element;

    /// The value (one-value services).
    template <class U = T, class = std::enable_if_t<!Payload<U>::slice>>
    U* get() {
        return static_cast<U*>(loan_.data);
    }
    template <class U = T, class = std::enable_if_t<!Payload<U>::slice>>
    U& operator*() {
        return *get();
    }
    template <class U = T, class = std::enable_if_t<!Payload<U>::slice>>
    U* operator->() {
        return get();
    }
    /// The elements (a slice service: `size()` of them; a value service: one).
    Element* data() { return static_cast<Element*>(loan_.data); }
    std::size_t size() const { return static_cast<std::size_t>(loan_.len_bytes / sizeof(Element)); }
    Element& operator[](std::size_t i) { return data()[i]; }

    /// The user header (a `PubSub<T, H>` with a header), in place and not initialised:
    /// write it before `send` (`loan.header() = FrameHeader{...}`). Its size is
    /// `sizeof(H)`: the service's recorded header type has that size (the open checked
    /// it), and `header_size()` says the same.
    template <class G = H, class = std::enable_if_t<has_header<G>>>
    G& header() {
        return *static_cast<G*>(loan_.header);
    }
    /// The user header's bytes (nullptr for a service without a header, and for an
    /// empty loan).
    void* header_data() { return loan_.header; }
    /// The user header's length in bytes (0 without one).
    std::size_t header_size() const { return static_cast<std::size_t>(loan_.header_len); }

    /// The payload's device address, for a loan of a publisher that pinned a
    /// CUDA-pinned pool (`IOX_STATUS_NO_DEVICE_POINTER` otherwise): where a kernel
    /// writes it (finish that work before `send`).
    Result<std::uint64_t> device_ptr() const {
        std::uint64_t p = 0;
        IoxStatus s = iox_held_loan_device_ptr(&loan_, &p);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return p;
    }

    /// Sends the payload (it must be fully written, and the header if the service has
    /// one) to every connected subscriber; how many got it.
    Result<std::uint64_t> send() && {
        std::uint64_t delivered = 0;
        IoxStatus s = iox_held_loan_send(&loan_, &delivered);
        // Refused from another thread, the loan stays, for the thread that loaned it.
        if (s != IOX_STATUS_WRONG_THREAD) spend();
        if (s != IOX_STATUS_OK) return Error::last(s);
        return delivered;
    }

private:
    friend class Publisher<T, H>;
    void discard() {
        if (loan_.live != 0) iox_held_loan_discard(&loan_);
    }
    /// Empty from here on (the loan was sent or moved out).
    void spend() {
        loan_.data = nullptr;
        loan_.len_bytes = 0;
        loan_.header = nullptr;
        loan_.header_len = 0;
        loan_.live = 0;
    }
    IoxHeldLoan loan_;
};

/// A received `T` (with its user header `H`, for a service with one), read in place;
/// released when dropped. It holds the sample itself (no table is looked up per call)
/// and may outlive its subscriber; it is moved, never copied.
template <class T, class H = NoHeader>
class Sample {
public:
    /// An empty sample (what a moved-from one is): nothing to release.
    explicit Sample(Spent) noexcept { spend(); }
    // Moves copy the bytes (an empty sample's opaque part is never written).
    Sample(Sample&& o) noexcept {
        std::memcpy(&sample_, &o.sample_, sizeof sample_);
        o.spend();
    }
    Sample& operator=(Sample&& o) noexcept {
        if (this != &o) {
            release();
            std::memcpy(&sample_, &o.sample_, sizeof sample_);
            o.spend();
        }
        return *this;
    }
    Sample(const Sample&) = delete;
    Sample& operator=(const Sample&) = delete;
    ~Sample() { release(); }

    using Element = typename Payload<T>::Element;

    /// The value (one-value services).
    template <class U = T, class = std::enable_if_t<!Payload<U>::slice>>
    const U* get() const {
        return static_cast<const U*>(sample_.data);
    }
    template <class U = T, class = std::enable_if_t<!Payload<U>::slice>>
    const U& operator*() const {
        return *get();
    }
    template <class U = T, class = std::enable_if_t<!Payload<U>::slice>>
    const U* operator->() const {
        return get();
    }
    /// The elements (a slice service: `size()` of them; a value service: one).
    const Element* data() const { return static_cast<const Element*>(sample_.data); }
    std::size_t size() const { return static_cast<std::size_t>(sample_.len); }
    const Element& operator[](std::size_t i) const { return data()[i]; }

    /// The user header the publisher wrote (a `PubSub<T, H>` with a header), in place.
    template <class G = H, class = std::enable_if_t<has_header<G>>>
    const G& header() const {
        return *static_cast<const G*>(sample_.header);
    }
    /// The user header's bytes (nullptr for a service without a header, and for an
    /// empty sample).
    const void* header_data() const { return sample_.header; }
    /// The user header's length in bytes (0 without one).
    std::size_t header_size() const { return static_cast<std::size_t>(sample_.header_len); }

    /// The payload's device address, for a sample of a subscriber that pinned a
    /// CUDA-pinned pool (`IOX_STATUS_NO_DEVICE_POINTER` otherwise).
    Result<std::uint64_t> device_ptr() const {
        std::uint64_t p = 0;
        IoxStatus s = iox_held_sample_device_ptr(&sample_, &p);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return p;
    }

private:
    friend class Subscriber<T, H>;
    void release() {
        if (sample_.live != 0) iox_held_sample_release(&sample_);
    }
    /// Empty from here on (the sample was moved out).
    void spend() {
        sample_.data = nullptr;
        sample_.len_bytes = 0;
        sample_.len = 0;
        sample_.header = nullptr;
        sample_.header_len = 0;
        sample_.live = 0;
    }
    IoxHeldSample sample_;
};

/// A publisher of `T` (with user header `H`; use it from the thread that created it).
template <class T, class H>
class Publisher {
public:
    Publisher(Publisher&& o) noexcept : port_(std::exchange(o.port_, nullptr)) {}
    Publisher& operator=(Publisher&& o) noexcept {
        if (this != &o) {
            if (port_ != nullptr) iox_publisher_drop(port_);
            port_ = std::exchange(o.port_, nullptr);
        }
        return *this;
    }
    Publisher(const Publisher&) = delete;
    Publisher& operator=(const Publisher&) = delete;
    ~Publisher() {
        if (port_ != nullptr) iox_publisher_drop(port_);
    }

    /// Loans a chunk for one `T` (not initialised: write all of it, and the header).
    template <class U = T, class = std::enable_if_t<!Payload<U>::slice>>
    Result<Loan<T, H>> loan() {
        return loan_bytes(sizeof(U));
    }

    /// Loans a chunk for `n` elements (a slice service; not initialised: write them all,
    /// and the header).
    template <class U = T, class = std::enable_if_t<Payload<U>::slice>>
    Result<Loan<T, H>> loan(std::size_t n) {
        return loan_bytes(n * sizeof(typename Payload<U>::Element));
    }

    /// Loans, copies `value` in and sends it; how many subscribers got it (a service
    /// without a user header).
    template <class U = T, class G = H, class = std::enable_if_t<!Payload<U>::slice && !has_header<G>>>
    Result<std::uint64_t> send_copy(const U& value) {
        auto l = loan();
        if (!l) return l.error();
        *l.value() = value;
        return std::move(l.value()).send();
    }

    /// Loans, copies `header` and `value` in and sends them; how many subscribers got
    /// them (a service with a user header).
    template <class U = T, class G = H, class = std::enable_if_t<!Payload<U>::slice && has_header<G>>>
    Result<std::uint64_t> send_copy(const G& header, const U& value) {
        auto l = loan();
        if (!l) return l.error();
        l->header() = header;
        *l.value() = value;
        return std::move(l.value()).send();
    }

    /// The publisher's view of the pool.
    Result<IoxPoolInfo> pool_info() const {
        IoxPoolInfo info{};
        IoxStatus s = iox_publisher_pool_info(port_, &info);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return info;
    }

private:
    template <class, class>
    friend class PubSub;
    explicit Publisher(IoxPublisher* port) : port_(port) {}
    Result<Loan<T, H>> loan_bytes(std::size_t bytes) {
        // Filled in place (with NRVO, not moved on its way to the caller).
        Result<Loan<T, H>> r(std::in_place, Spent{});
        IoxStatus s = iox_publisher_loan_held(port_, bytes, &r->loan_);
        if (s != IOX_STATUS_OK) r = Error::last(s);
        return r;
    }
    IoxPublisher* port_;
};

/// A subscriber of `T` (with user header `H`; use it from the thread that created it).
template <class T, class H>
class Subscriber {
public:
    Subscriber(Subscriber&& o) noexcept : port_(std::exchange(o.port_, nullptr)) {}
    Subscriber& operator=(Subscriber&& o) noexcept {
        if (this != &o) {
            if (port_ != nullptr) iox_subscriber_drop(port_);
            port_ = std::exchange(o.port_, nullptr);
        }
        return *this;
    }
    Subscriber(const Subscriber&) = delete;
    Subscriber& operator=(const Subscriber&) = delete;
    ~Subscriber() {
        if (port_ != nullptr) iox_subscriber_drop(port_);
    }

    /// The next sample, if one is waiting (never blocks).
    Result<std::optional<Sample<T, H>>> receive() { return receive_for(std::chrono::nanoseconds(0)); }

    /// The next sample, waiting up to `timeout` for one (sleeping, not spinning).
    template <class Rep, class Period>
    Result<std::optional<Sample<T, H>>> receive_for(std::chrono::duration<Rep, Period> timeout) {
        // Filled in place (with NRVO, not moved on its way to the caller).
        Result<std::optional<Sample<T, H>>> r(std::in_place, std::in_place, Spent{});
        bool got = false;
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
        IoxStatus s = iox_subscriber_receive_held(port_, ns > 0 ? static_cast<std::uint64_t>(ns) : 0,
                                                  &(*r)->sample_, &got);
        if (s != IOX_STATUS_OK) {
            r = Error::last(s);
        } else if (!got) {
            r->reset();
        }
        return r;
    }

    /// The subscriber's view of the pool.
    Result<IoxPoolInfo> pool_info() const {
        IoxPoolInfo info{};
        IoxStatus s = iox_subscriber_pool_info(port_, &info);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return info;
    }

    /// The readiness descriptor (readable when a sample waits; owned by the subscriber),
    /// for `WaitSet::attach` or the program's own poll loop.
    Result<int> fd() const {
        int fd = -1;
        IoxStatus s = iox_subscriber_fd(port_, &fd);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return fd;
    }

private:
    template <class, class>
    friend class PubSub;
    explicit Subscriber(IoxSubscriber* port) : port_(port) {}
    IoxSubscriber* port_;
};

/// A tensor's element type, shape and strides (in elements; row-major when made with
/// `contiguous`): what a device sample carries beside its bytes.
struct Tensor {
    IoxElement element = IOX_ELEMENT_NONE;
    std::vector<std::uint64_t> shape{};
    std::vector<std::int64_t> strides{};

    /// A row-major tensor of `shape`.
    static Tensor contiguous(IoxElement element, std::vector<std::uint64_t> shape) {
        std::vector<std::int64_t> strides(shape.size());
        std::int64_t next = 1;
        for (std::size_t d = shape.size(); d-- > 0;) {
            strides[d] = next;
            next *= static_cast<std::int64_t>(shape[d] == 0 ? 1 : shape[d]);
        }
        return Tensor{element, std::move(shape), std::move(strides)};
    }
    static Tensor of(const IoxTensor& t) {
        Tensor out{static_cast<IoxElement>(t.element), {}, {}};
        for (std::uint32_t d = 0; d < t.ndim && d < IOX_TENSOR_MAX_DIMS; ++d) {
            out.shape.push_back(t.shape[d]);
            out.strides.push_back(t.strides[d]);
        }
        return out;
    }
    /// The C description (more than `IOX_TENSOR_MAX_DIMS` dimensions, or strides of
    /// another count, are refused by the loan).
    IoxTensor to_c() const {
        IoxTensor t{};
        t.element = element;
        t.ndim = static_cast<std::uint32_t>(shape.size() == strides.size() ? shape.size() : IOX_TENSOR_MAX_DIMS + 1);
        for (std::size_t d = 0; d < shape.size() && d < IOX_TENSOR_MAX_DIMS; ++d) t.shape[d] = shape[d];
        for (std::size_t d = 0; d < strides.size() && d < IOX_TENSOR_MAX_DIMS; ++d) t.strides[d] = strides[d];
        return t;
    }
};

/// The element type of numbers `E` (`IOX_ELEMENT_NONE` for other types).
template <class E>
constexpr IoxElement element_of() {
    if constexpr (std::is_same_v<E, float>) return IOX_ELEMENT_F32;
    else if constexpr (std::is_same_v<E, double>) return IOX_ELEMENT_F64;
    else if constexpr (std::is_same_v<E, std::uint8_t>) return IOX_ELEMENT_U8;
    else if constexpr (std::is_same_v<E, std::uint16_t>) return IOX_ELEMENT_U16;
    else if constexpr (std::is_same_v<E, std::uint32_t>) return IOX_ELEMENT_U32;
    else if constexpr (std::is_same_v<E, std::uint64_t>) return IOX_ELEMENT_U64;
    else if constexpr (std::is_same_v<E, std::int8_t>) return IOX_ELEMENT_I8;
    else if constexpr (std::is_same_v<E, std::int16_t>) return IOX_ELEMENT_I16;
    else if constexpr (std::is_same_v<E, std::int32_t>) return IOX_ELEMENT_I32;
    else if constexpr (std::is_same_v<E, std::int64_t>) return IOX_ELEMENT_I64;
    else return IOX_ELEMENT_NONE;
}

class DevicePublisher;
class DeviceSubscriber;

/// A loaned chunk of GPU memory (a device service's), ordered on the stream it was
/// loaned on: write `device_ptr()` with work on that stream, then `send(stream)`.
/// Discarded when dropped unsent. Move-only; must not outlive its publisher. Streams
/// are `CUstream`s as `void*` (nullptr: the legacy default stream).
class DeviceLoan {
public:
    DeviceLoan(DeviceLoan&& o) noexcept : port_(std::exchange(o.port_, nullptr)), loan_(o.loan_) {}
    DeviceLoan& operator=(DeviceLoan&& o) noexcept {
        if (this != &o) {
            discard();
            port_ = std::exchange(o.port_, nullptr);
            loan_ = o.loan_;
        }
        return *this;
    }
    DeviceLoan(const DeviceLoan&) = delete;
    DeviceLoan& operator=(const DeviceLoan&) = delete;
    ~DeviceLoan() { discard(); }

    /// The chunk's device address.
    std::uint64_t device_ptr() const { return loan_.device_ptr; }
    /// Bytes loaned (the tensor's span).
    std::size_t size_bytes() const { return static_cast<std::size_t>(loan_.len_bytes); }
    /// The tensor the sample will carry.
    Tensor tensor() const { return Tensor::of(loan_.tensor); }

    /// Records the end of the writes on `stream` and sends; how many subscribers got it.
    Result<std::uint64_t> send(void* stream) && {
        std::uint64_t delivered = 0;
        IoxStatus s = iox_device_publisher_send(port_, loan_.id, stream, &delivered);
        if (s != IOX_STATUS_WRONG_THREAD) port_ = nullptr;
        if (s != IOX_STATUS_OK) return Error::last(s);
        return delivered;
    }

private:
    friend class DevicePublisher;
    DeviceLoan(IoxDevicePublisher* port, const IoxDeviceLoan& loan) : port_(port), loan_(loan) {}
    void discard() {
        if (port_ != nullptr) iox_device_publisher_discard(port_, loan_.id);
        port_ = nullptr;
    }
    IoxDevicePublisher* port_;
    IoxDeviceLoan loan_;
};

/// A publisher of a device service (`PubSub<E[]>` with memory type 3, `CudaDevice`):
/// loans chunks of GPU memory for tensors of the service's element type.
class DevicePublisher {
public:
    DevicePublisher(DevicePublisher&& o) noexcept : port_(std::exchange(o.port_, nullptr)) {}
    DevicePublisher& operator=(DevicePublisher&& o) noexcept {
        if (this != &o) {
            if (port_ != nullptr) iox_device_publisher_drop(port_);
            port_ = std::exchange(o.port_, nullptr);
        }
        return *this;
    }
    DevicePublisher(const DevicePublisher&) = delete;
    DevicePublisher& operator=(const DevicePublisher&) = delete;
    ~DevicePublisher() {
        if (port_ != nullptr) iox_device_publisher_drop(port_);
    }

    /// A chunk for `tensor`, ordered on `stream` after the chunk's last readers
    /// (`IOX_STATUS_INVALID_TENSOR`, naming the sizes, for one that does not fit).
    Result<DeviceLoan> loan(const Tensor& tensor, void* stream) {
        IoxTensor t = tensor.to_c();
        IoxDeviceLoan l{};
        IoxStatus s = iox_device_publisher_loan(port_, stream, &t, &l);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return DeviceLoan(port_, l);
    }
    /// A chunk for `bytes` bytes (a 1-D tensor of the element type), ordered on `stream`.
    Result<DeviceLoan> loan_bytes(std::size_t bytes, void* stream) {
        IoxDeviceLoan l{};
        IoxStatus s = iox_device_publisher_loan_bytes(port_, stream, bytes, &l);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return DeviceLoan(port_, l);
    }
    /// Waits up to `timeout` until `n` subscribers are connected; how many are.
    template <class Rep, class Period>
    Result<std::uint64_t> wait_for_subscribers(std::uint64_t n, std::chrono::duration<Rep, Period> timeout) {
        std::uint64_t got = 0;
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
        IoxStatus s = iox_device_publisher_wait_for_subscribers(port_, n, static_cast<std::uint64_t>(ns > 0 ? ns : 0), &got);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return got;
    }
    /// The service's element type (`IOX_ELEMENT_NONE`: not a slice of numbers).
    IoxElement element() const {
        IoxElement e = IOX_ELEMENT_NONE;
        iox_device_publisher_info(port_, &e, nullptr, nullptr);
        return e;
    }
    /// The largest tensor in bytes.
    std::uint64_t max_bytes() const {
        std::uint64_t n = 0;
        iox_device_publisher_info(port_, nullptr, &n, nullptr);
        return n;
    }
    /// This process's ordinal of the service's GPU.
    int device() const {
        std::int32_t d = -1;
        iox_device_publisher_info(port_, nullptr, nullptr, &d);
        return d;
    }

private:
    template <class T, class H>
    friend class PubSub;
    explicit DevicePublisher(IoxDevicePublisher* p) : port_(p) {}
    IoxDevicePublisher* port_;
};

/// A received tensor in GPU memory: read `device_ptr()` with work enqueued on a stream
/// after `wait(stream)`; released (after the reads on the stream last waited on) when
/// dropped, or on a given stream with `release_on`. Move-only; must not outlive its
/// subscriber.
class DeviceSample {
public:
    DeviceSample(DeviceSample&& o) noexcept : port_(std::exchange(o.port_, nullptr)), sample_(o.sample_) {}
    DeviceSample& operator=(DeviceSample&& o) noexcept {
        if (this != &o) {
            release();
            port_ = std::exchange(o.port_, nullptr);
            sample_ = o.sample_;
        }
        return *this;
    }
    DeviceSample(const DeviceSample&) = delete;
    DeviceSample& operator=(const DeviceSample&) = delete;
    ~DeviceSample() { release(); }

    std::uint64_t device_ptr() const { return sample_.device_ptr; }
    std::size_t size_bytes() const { return static_cast<std::size_t>(sample_.len_bytes); }
    /// This process's ordinal of the GPU.
    int device() const { return sample_.device; }
    /// Its element type, shape and strides.
    Tensor tensor() const { return Tensor::of(sample_.tensor); }

    /// Makes `stream` wait for the publisher's write.
    Result<bool> wait(void* stream) {
        IoxStatus s = iox_device_subscriber_wait(port_, sample_.id, stream);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return true;
    }
    /// Releases the sample after the reads enqueued on `stream`.
    Result<bool> release_on(void* stream) && {
        IoxStatus s = iox_device_subscriber_release_on(port_, sample_.id, stream);
        if (s != IOX_STATUS_WRONG_THREAD) port_ = nullptr;
        if (s != IOX_STATUS_OK) return Error::last(s);
        return true;
    }

private:
    friend class DeviceSubscriber;
    DeviceSample(IoxDeviceSubscriber* port, const IoxDeviceSample& s) : port_(port), sample_(s) {}
    void release() {
        if (port_ != nullptr) iox_device_subscriber_release(port_, sample_.id);
        port_ = nullptr;
    }
    IoxDeviceSubscriber* port_;
    IoxDeviceSample sample_;
};

/// A subscriber of a device service.
class DeviceSubscriber {
public:
    DeviceSubscriber(DeviceSubscriber&& o) noexcept : port_(std::exchange(o.port_, nullptr)) {}
    DeviceSubscriber& operator=(DeviceSubscriber&& o) noexcept {
        if (this != &o) {
            if (port_ != nullptr) iox_device_subscriber_drop(port_);
            port_ = std::exchange(o.port_, nullptr);
        }
        return *this;
    }
    DeviceSubscriber(const DeviceSubscriber&) = delete;
    DeviceSubscriber& operator=(const DeviceSubscriber&) = delete;
    ~DeviceSubscriber() {
        if (port_ != nullptr) iox_device_subscriber_drop(port_);
    }

    /// The next sample, waiting up to `timeout` (zero: not at all), or std::nullopt.
    template <class Rep = std::int64_t, class Period = std::nano>
    Result<std::optional<DeviceSample>> receive(std::chrono::duration<Rep, Period> timeout = {}) {
        IoxDeviceSample got{};
        bool received = false;
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
        IoxStatus s = iox_device_subscriber_receive(port_, static_cast<std::uint64_t>(ns > 0 ? ns : 0), &got, &received);
        if (s != IOX_STATUS_OK) return Error::last(s);
        if (!received) return std::optional<DeviceSample>{};
        return std::optional<DeviceSample>(DeviceSample(port_, got));
    }

private:
    template <class T, class H>
    friend class PubSub;
    explicit DeviceSubscriber(IoxDeviceSubscriber* p) : port_(p) {}
    IoxDeviceSubscriber* port_;
};

class TensorPublisher;
class TensorSubscriber;

/// A loaned chunk of a host tensor service for one tensor: write all `size_bytes()`
/// bytes at `data()` (as `tensor()` lays them out), then `send()`. Discarded when dropped
/// unsent. Move-only; must not outlive its publisher.
class TensorLoan {
public:
    TensorLoan(TensorLoan&& o) noexcept : port_(std::exchange(o.port_, nullptr)), loan_(o.loan_) {}
    TensorLoan& operator=(TensorLoan&& o) noexcept {
        if (this != &o) {
            discard();
            port_ = std::exchange(o.port_, nullptr);
            loan_ = o.loan_;
        }
        return *this;
    }
    TensorLoan(const TensorLoan&) = delete;
    TensorLoan& operator=(const TensorLoan&) = delete;
    ~TensorLoan() { discard(); }

    /// The tensor's first byte.
    void* data() { return loan_.data; }
    /// The tensor's first element as `E` (the service's element type).
    template <class E>
    E* elements() {
        return static_cast<E*>(loan_.data);
    }
    /// Bytes loaned (the tensor's span).
    std::size_t size_bytes() const { return static_cast<std::size_t>(loan_.len_bytes); }
    /// The tensor the sample carries.
    Tensor tensor() const { return Tensor::of(loan_.tensor); }

    /// Sends the tensor (every byte written); how many subscribers got it.
    Result<std::uint64_t> send() && {
        std::uint64_t delivered = 0;
        IoxStatus s = iox_tensor_publisher_send(port_, loan_.id, &delivered);
        if (s != IOX_STATUS_WRONG_THREAD) port_ = nullptr;
        if (s != IOX_STATUS_OK) return Error::last(s);
        return delivered;
    }

private:
    friend class TensorPublisher;
    TensorLoan(IoxTensorPublisher* port, const IoxTensorLoan& loan) : port_(port), loan_(loan) {}
    void discard() {
        if (port_ != nullptr) iox_tensor_publisher_discard(port_, loan_.id);
        port_ = nullptr;
    }
    IoxTensorPublisher* port_;
    IoxTensorLoan loan_;
};

/// A publisher of a host tensor service: loans chunks for tensors of the service's
/// element type, the same calls as `DevicePublisher` without streams.
class TensorPublisher {
public:
    TensorPublisher(TensorPublisher&& o) noexcept : port_(std::exchange(o.port_, nullptr)) {}
    TensorPublisher& operator=(TensorPublisher&& o) noexcept {
        if (this != &o) {
            if (port_ != nullptr) iox_tensor_publisher_drop(port_);
            port_ = std::exchange(o.port_, nullptr);
        }
        return *this;
    }
    TensorPublisher(const TensorPublisher&) = delete;
    TensorPublisher& operator=(const TensorPublisher&) = delete;
    ~TensorPublisher() {
        if (port_ != nullptr) iox_tensor_publisher_drop(port_);
    }

    /// A chunk for `tensor` (`IOX_STATUS_INVALID_TENSOR`, naming the sizes, for one that
    /// does not fit the service).
    Result<TensorLoan> loan(const Tensor& tensor) {
        IoxTensor t = tensor.to_c();
        IoxTensorLoan l{};
        IoxStatus s = iox_tensor_publisher_loan(port_, &t, &l);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return TensorLoan(port_, l);
    }
    /// Waits up to `timeout` until `n` subscribers are connected; how many are.
    template <class Rep, class Period>
    Result<std::uint64_t> wait_for_subscribers(std::uint64_t n, std::chrono::duration<Rep, Period> timeout) {
        std::uint64_t got = 0;
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
        IoxStatus s = iox_tensor_publisher_wait_for_subscribers(port_, n, static_cast<std::uint64_t>(ns > 0 ? ns : 0), &got);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return got;
    }
    /// The service's element type.
    IoxElement element() const {
        IoxElement e = IOX_ELEMENT_NONE;
        iox_tensor_publisher_info(port_, &e, nullptr);
        return e;
    }
    /// The largest tensor in bytes.
    std::uint64_t max_bytes() const {
        std::uint64_t n = 0;
        iox_tensor_publisher_info(port_, nullptr, &n);
        return n;
    }

private:
    template <class T, class H>
    friend class PubSub;
    explicit TensorPublisher(IoxTensorPublisher* p) : port_(p) {}
    IoxTensorPublisher* port_;
};

/// A received host tensor: read `size_bytes()` bytes at `data()` as `tensor()` lays
/// them out; released when dropped. Move-only; must not outlive its subscriber.
class TensorSample {
public:
    TensorSample(TensorSample&& o) noexcept : port_(std::exchange(o.port_, nullptr)), sample_(o.sample_) {}
    TensorSample& operator=(TensorSample&& o) noexcept {
        if (this != &o) {
            release();
            port_ = std::exchange(o.port_, nullptr);
            sample_ = o.sample_;
        }
        return *this;
    }
    TensorSample(const TensorSample&) = delete;
    TensorSample& operator=(const TensorSample&) = delete;
    ~TensorSample() { release(); }

    /// The tensor's first byte (read-only).
    const void* data() const { return sample_.data; }
    /// The tensor's first element as `E` (the service's element type).
    template <class E>
    const E* elements() const {
        return static_cast<const E*>(sample_.data);
    }
    std::size_t size_bytes() const { return static_cast<std::size_t>(sample_.len_bytes); }
    /// Its element type, shape and strides (checked against the service and the bytes).
    Tensor tensor() const { return Tensor::of(sample_.tensor); }

private:
    friend class TensorSubscriber;
    TensorSample(IoxTensorSubscriber* port, const IoxTensorSample& s) : port_(port), sample_(s) {}
    void release() {
        if (port_ != nullptr) iox_tensor_subscriber_release(port_, sample_.id);
        port_ = nullptr;
    }
    IoxTensorSubscriber* port_;
    IoxTensorSample sample_;
};

/// A subscriber of a host tensor service.
class TensorSubscriber {
public:
    TensorSubscriber(TensorSubscriber&& o) noexcept : port_(std::exchange(o.port_, nullptr)) {}
    TensorSubscriber& operator=(TensorSubscriber&& o) noexcept {
        if (this != &o) {
            if (port_ != nullptr) iox_tensor_subscriber_drop(port_);
            port_ = std::exchange(o.port_, nullptr);
        }
        return *this;
    }
    TensorSubscriber(const TensorSubscriber&) = delete;
    TensorSubscriber& operator=(const TensorSubscriber&) = delete;
    ~TensorSubscriber() {
        if (port_ != nullptr) iox_tensor_subscriber_drop(port_);
    }

    /// The next tensor, waiting up to `timeout` (zero: not at all), or std::nullopt.
    template <class Rep = std::int64_t, class Period = std::nano>
    Result<std::optional<TensorSample>> receive(std::chrono::duration<Rep, Period> timeout = {}) {
        IoxTensorSample got{};
        bool received = false;
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
        IoxStatus s = iox_tensor_subscriber_receive(port_, static_cast<std::uint64_t>(ns > 0 ? ns : 0), &got, &received);
        if (s != IOX_STATUS_OK) return Error::last(s);
        if (!received) return std::optional<TensorSample>{};
        return std::optional<TensorSample>(TensorSample(port_, got));
    }

private:
    template <class T, class H>
    friend class PubSub;
    explicit TensorSubscriber(IoxTensorSubscriber* p) : port_(p) {}
    IoxTensorSubscriber* port_;
};

/// A publish-subscribe service of `T`, shared with Rust, Python and other C++ programs
/// that name the same type. With `H` (not `NoHeader`), every sample also carries a
/// user header of type `H` (named by `TypeName<H>`, as a Rust program's
/// `.user_header::<H>()`); every program of the service must declare the same header
/// (or none), else the open fails naming both.
template <class T, class H>
class PubSub {
    using Element = typename Payload<T>::Element;
    static_assert(std::is_trivially_copyable_v<Element> && std::is_standard_layout_v<Element>,
                  "iox payloads are trivially copyable standard-layout types");
    static_assert(std::is_trivially_copyable_v<H> && std::is_standard_layout_v<H>,
                  "iox user headers are trivially copyable standard-layout types");

public:
    static Result<PubSub> open_or_create(const std::string& name, const Options& o = {}) {
        return open(name, IOX_OPEN_OR_CREATE, o);
    }
    static Result<PubSub> open_existing(const std::string& name, const Options& o = {}) {
        return open(name, IOX_OPEN, o);
    }
    static Result<PubSub> create(const std::string& name, const Options& o = {}) {
        return open(name, IOX_CREATE, o);
    }

    PubSub(PubSub&& o) noexcept : service_(std::exchange(o.service_, nullptr)) {}
    PubSub& operator=(PubSub&& o) noexcept {
        if (this != &o) {
            if (service_ != nullptr) iox_pubsub_service_drop(service_);
            service_ = std::exchange(o.service_, nullptr);
        }
        return *this;
    }
    PubSub(const PubSub&) = delete;
    PubSub& operator=(const PubSub&) = delete;
    ~PubSub() {
        if (service_ != nullptr) iox_pubsub_service_drop(service_);
    }

    /// How many publishers and subscribers the service has now (a snapshot).
    Result<std::pair<std::uint64_t, std::uint64_t>> port_counts() const {
        std::uint64_t p = 0, s = 0;
        IoxStatus st = iox_pubsub_port_counts(service_, &p, &s);
        if (st != IOX_STATUS_OK) return Error::last(st);
        return std::make_pair(p, s);
    }

    /// The attributes the service's creator recorded, sorted by key.
    Result<std::vector<Attribute>> attributes() const {
        return detail::read_attributes(service_, iox_pubsub_attribute_count, iox_pubsub_attribute);
    }

    /// The value of attribute `key`, or std::nullopt if the service has none.
    Result<std::optional<std::string>> attribute(const std::string& key) const {
        return detail::read_attribute(service_, key, iox_pubsub_attribute_get);
    }

    /// The service's access policy as text (e.g. "publish: uid 1000 (creator); read: uid
    /// 1002"), or std::nullopt if it has none.
    Result<std::optional<std::string>> access_policy() const {
        const char* text = nullptr;
        IoxStatus st = iox_pubsub_access_policy(service_, &text);
        if (st != IOX_STATUS_OK) return Error::last(st);
        if (text == nullptr) return std::optional<std::string>();
        return std::optional<std::string>(text);
    }

    Result<Publisher<T, H>> publisher(bool pin_memory = false) {
        IoxPublisher* p = nullptr;
        IoxStatus s = iox_publisher_create(service_, pin_memory, &p);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return Publisher<T, H>(p);
    }

    Result<Subscriber<T, H>> subscriber(bool pin_memory = false) {
        IoxSubscriber* p = nullptr;
        IoxStatus s = iox_subscriber_create(service_, pin_memory, &p);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return Subscriber<T, H>(p);
    }

    /// A publisher of a device service (memory type 3, `CudaDevice`): its loans are
    /// tensors in GPU memory (see `DevicePublisher`).
    Result<DevicePublisher> device_publisher() {
        IoxDevicePublisher* p = nullptr;
        IoxStatus s = iox_device_publisher_create(service_, &p);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return DevicePublisher(p);
    }

    /// A subscriber of a device service (see `DeviceSubscriber`).
    Result<DeviceSubscriber> device_subscriber() {
        IoxDeviceSubscriber* p = nullptr;
        IoxStatus s = iox_device_subscriber_create(service_, &p);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return DeviceSubscriber(p);
    }

    /// A publisher of a host tensor service (`Options::tensors`): its loans are tensors
    /// in host memory (see `TensorPublisher`), the only publisher such a service takes.
    Result<TensorPublisher> tensor_publisher() {
        IoxTensorPublisher* p = nullptr;
        IoxStatus s = iox_tensor_publisher_create(service_, &p);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return TensorPublisher(p);
    }

    /// A subscriber of a host tensor service whose samples carry their tensors (see
    /// `TensorSubscriber`).
    Result<TensorSubscriber> tensor_subscriber() {
        IoxTensorSubscriber* p = nullptr;
        IoxStatus s = iox_tensor_subscriber_create(service_, &p);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return TensorSubscriber(p);
    }

private:
    explicit PubSub(IoxPubSubService* s) : service_(s) {}
    static Result<PubSub> open(const std::string& name, std::uint32_t mode, const Options& o) {
        IoxPubSubOptions opts;
        iox_pubsub_options_init(&opts);
        opts.root = o.root;
        opts.payload = type_of<Element>();
        opts.payload.slice = Payload<T>::slice;
        opts.payload.max_slice_len = o.max_slice_len;
        opts.max_publishers = o.max_publishers;
        opts.max_subscribers = o.max_subscribers;
        opts.subscriber_buffer = o.subscriber_buffer;
        opts.history = o.history;
        opts.max_loans = o.max_loans;
        opts.max_held = o.max_held;
        if (o.memory_type) {
            opts.memory_type = *o.memory_type;
            opts.memory_type_set = true;
        }
        opts.overflow = o.overflow;
        opts.tensors = o.tensors;
        opts.permissions = o.permissions;
        IoxAccessPolicy access{};
        if (o.access) {
            access = o.access->c();
            opts.access = &access;
        }
        if (o.page_size) {
            opts.page_size = static_cast<std::uint32_t>(*o.page_size);
            opts.page_size_set = true;
        }
        detail::AttributeArrays attributes(o.attributes, o.required_attributes);
        attributes.fill(opts);
        if constexpr (has_header<H>) opts.user_header = type_of<H>();
        IoxPubSubService* s = nullptr;
        IoxStatus st = iox_pubsub_open(name.c_str(), mode, &opts, &s);
        if (st != IOX_STATUS_OK) return Error::last(st);
        return PubSub(s);
    }
    IoxPubSubService* service_;
};

/// Settings of an event service (0: the default).
struct EventOptions {
    const char* root = nullptr;
    std::uint32_t max_notifiers = 0;
    std::uint32_t max_listeners = 0;
    std::uint32_t event_id_max = 0;
    /// Attributes to record when creating (not compared on open).
    std::vector<Attribute> attributes{};
    /// Attributes an existing service must have when opening (a call that may create
    /// must record them too).
    std::vector<RequiredAttribute> required_attributes{};
};

/// Signals event ids to an event service's listeners (use it from its thread).
class Notifier {
public:
    Notifier(Notifier&& o) noexcept : port_(std::exchange(o.port_, nullptr)) {}
    Notifier& operator=(Notifier&& o) noexcept {
        if (this != &o) {
            if (port_ != nullptr) iox_notifier_drop(port_);
            port_ = std::exchange(o.port_, nullptr);
        }
        return *this;
    }
    Notifier(const Notifier&) = delete;
    Notifier& operator=(const Notifier&) = delete;
    ~Notifier() {
        if (port_ != nullptr) iox_notifier_drop(port_);
    }

    /// Signals `event_id`; how many listeners it reached.
    Result<std::uint64_t> notify(std::uint32_t event_id) {
        std::uint64_t reached = 0;
        IoxStatus s = iox_notifier_notify(port_, event_id, &reached);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return reached;
    }

private:
    friend class Event;
    explicit Notifier(IoxNotifier* port) : port_(port) {}
    IoxNotifier* port_;
};

/// Waits for event ids (use it from its thread).
class Listener {
public:
    Listener(Listener&& o) noexcept : port_(std::exchange(o.port_, nullptr)) {}
    Listener& operator=(Listener&& o) noexcept {
        if (this != &o) {
            if (port_ != nullptr) iox_listener_drop(port_);
            port_ = std::exchange(o.port_, nullptr);
        }
        return *this;
    }
    Listener(const Listener&) = delete;
    Listener& operator=(const Listener&) = delete;
    ~Listener() {
        if (port_ != nullptr) iox_listener_drop(port_);
    }

    /// One pending id, waiting up to `timeout` (0: only looks), sleeping.
    template <class Rep = long, class Period = std::ratio<1>>
    Result<std::optional<std::uint32_t>> wait_for(std::chrono::duration<Rep, Period> timeout = std::chrono::seconds(0)) {
        std::uint32_t id = 0;
        bool got = false;
        auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(timeout).count();
        IoxStatus s = iox_listener_wait(port_, ns > 0 ? static_cast<std::uint64_t>(ns) : 0, &id, &got);
        if (s != IOX_STATUS_OK) return Error::last(s);
        if (!got) return std::optional<std::uint32_t>();
        return std::optional<std::uint32_t>(id);
    }

    /// The readiness descriptor (readable while an id is pending; owned by the listener).
    Result<int> fd() const {
        int fd = -1;
        IoxStatus s = iox_listener_fd(port_, &fd);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return fd;
    }

    /// Adopts `port`, a listener from the C API (`iox_listener_create`,
    /// `iox_blackboard_listener_create`), which it drops when destroyed.
    explicit Listener(IoxListener* port) : port_(port) {}

private:
    IoxListener* port_;
};

/// An event service.
class Event {
public:
    static Result<Event> open_or_create(const std::string& name, const EventOptions& o = {}) {
        return open(name, IOX_OPEN_OR_CREATE, o);
    }
    static Result<Event> open_existing(const std::string& name, const EventOptions& o = {}) {
        return open(name, IOX_OPEN, o);
    }
    static Result<Event> create(const std::string& name, const EventOptions& o = {}) {
        return open(name, IOX_CREATE, o);
    }

    Event(Event&& o) noexcept : service_(std::exchange(o.service_, nullptr)) {}
    Event& operator=(Event&& o) noexcept {
        if (this != &o) {
            if (service_ != nullptr) iox_event_service_drop(service_);
            service_ = std::exchange(o.service_, nullptr);
        }
        return *this;
    }
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    ~Event() {
        if (service_ != nullptr) iox_event_service_drop(service_);
    }

    /// The attributes the service's creator recorded, sorted by key.
    Result<std::vector<Attribute>> attributes() const {
        return detail::read_attributes(service_, iox_event_attribute_count, iox_event_attribute);
    }

    /// The value of attribute `key`, or std::nullopt if the service has none.
    Result<std::optional<std::string>> attribute(const std::string& key) const {
        return detail::read_attribute(service_, key, iox_event_attribute_get);
    }

    Result<Notifier> notifier() {
        IoxNotifier* p = nullptr;
        IoxStatus s = iox_notifier_create(service_, &p);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return Notifier(p);
    }

    Result<Listener> listener() {
        IoxListener* p = nullptr;
        IoxStatus s = iox_listener_create(service_, &p);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return Listener(p);
    }

private:
    explicit Event(IoxEventService* s) : service_(s) {}
    static Result<Event> open(const std::string& name, std::uint32_t mode, const EventOptions& o) {
        IoxEventOptions opts;
        iox_event_options_init(&opts);
        opts.root = o.root;
        opts.max_notifiers = o.max_notifiers;
        opts.max_listeners = o.max_listeners;
        opts.event_id_max = o.event_id_max;
        detail::AttributeArrays attributes(o.attributes, o.required_attributes);
        attributes.fill(opts);
        IoxEventService* s = nullptr;
        IoxStatus st = iox_event_open(name.c_str(), mode, &opts, &s);
        if (st != IOX_STATUS_OK) return Error::last(st);
        return Event(s);
    }
    IoxEventService* service_;
};

/// What a WaitSet wait found.
struct WaitResult {
    /// IOX_WAIT_EVENTS, IOX_WAIT_TIMEOUT, IOX_WAIT_TERMINATION or IOX_WAIT_INTERRUPT.
    std::uint32_t kind;
    /// With IOX_WAIT_EVENTS: each attachment with news.
    std::vector<IoxWaitSetEvent> events;

    bool fired(std::uint64_t id) const {
        for (const auto& e : events)
            if (e.id == id && e.fired) return true;
        return false;
    }
    bool missed_deadline(std::uint64_t id) const {
        for (const auto& e : events)
            if (e.id == id && e.missed_deadline) return true;
        return false;
    }
};

/// Wakes a WaitSet from another thread (its wait returns IOX_WAIT_INTERRUPT).
class Waker {
public:
    Waker(Waker&& o) noexcept : waker_(std::exchange(o.waker_, nullptr)) {}
    Waker& operator=(Waker&& o) noexcept {
        if (this != &o) {
            if (waker_ != nullptr) iox_waker_drop(waker_);
            waker_ = std::exchange(o.waker_, nullptr);
        }
        return *this;
    }
    Waker(const Waker&) = delete;
    Waker& operator=(const Waker&) = delete;
    ~Waker() {
        if (waker_ != nullptr) iox_waker_drop(waker_);
    }

    /// Wakes the WaitSet (any thread).
    Result<bool> wake() const {
        IoxStatus s = iox_waker_wake(waker_);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return true;
    }

private:
    friend class WaitSet;
    explicit Waker(IoxWaker* w) : waker_(w) {}
    IoxWaker* waker_;
};

/// Sleeps until an attached descriptor is readable, a deadline passes or an interval
/// ticks (use it from its thread).
class WaitSet {
public:
    static Result<WaitSet> create(bool termination_signals = true) {
        IoxWaitSet* ws = nullptr;
        IoxStatus s = iox_waitset_create(termination_signals, &ws);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return WaitSet(ws);
    }

    WaitSet(WaitSet&& o) noexcept : ws_(std::exchange(o.ws_, nullptr)), attached_(o.attached_) {}
    WaitSet& operator=(WaitSet&& o) noexcept {
        if (this != &o) {
            if (ws_ != nullptr) iox_waitset_drop(ws_);
            ws_ = std::exchange(o.ws_, nullptr);
            attached_ = o.attached_;
        }
        return *this;
    }
    WaitSet(const WaitSet&) = delete;
    WaitSet& operator=(const WaitSet&) = delete;
    ~WaitSet() {
        if (ws_ != nullptr) iox_waitset_drop(ws_);
    }

    /// Attaches descriptor `fd` (a port's `fd()`), optionally with a deadline; its id.
    Result<std::uint64_t> attach(int fd, std::chrono::nanoseconds deadline = std::chrono::nanoseconds(0)) {
        std::uint64_t id = 0;
        IoxStatus s = iox_waitset_attach_fd(ws_, fd, static_cast<std::uint64_t>(deadline.count()), &id);
        if (s != IOX_STATUS_OK) return Error::last(s);
        attached_++;
        return id;
    }

    /// Attaches an interval of `period`; its id.
    Result<std::uint64_t> attach_interval(std::chrono::nanoseconds period) {
        std::uint64_t id = 0;
        IoxStatus s = iox_waitset_attach_interval(ws_, static_cast<std::uint64_t>(period.count()), &id);
        if (s != IOX_STATUS_OK) return Error::last(s);
        attached_++;
        return id;
    }

    Result<bool> detach(std::uint64_t id) {
        IoxStatus s = iox_waitset_detach(ws_, id);
        if (s != IOX_STATUS_OK) return Error::last(s);
        attached_--;
        return true;
    }

    /// Waits up to `timeout` (sleeping) and reports what happened.
    Result<WaitResult> wait_for(std::chrono::nanoseconds timeout) {
        return wait(timeout.count() > 0 ? static_cast<std::uint64_t>(timeout.count()) : 0);
    }

    /// Waits without limit.
    Result<WaitResult> wait() { return wait(UINT64_MAX); }

    /// A waker for other threads.
    Result<Waker> waker() {
        IoxWaker* w = nullptr;
        IoxStatus s = iox_waitset_waker(ws_, &w);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return Waker(w);
    }

private:
    explicit WaitSet(IoxWaitSet* ws) : ws_(ws), attached_(0) {}
    Result<WaitResult> wait(std::uint64_t timeout_ns) {
        WaitResult r{IOX_WAIT_TIMEOUT, std::vector<IoxWaitSetEvent>(attached_)};
        std::size_t count = 0;
        IoxStatus s = iox_waitset_wait(ws_, timeout_ns, r.events.data(), r.events.size(), &count, &r.kind);
        if (s != IOX_STATUS_OK) return Error::last(s);
        r.events.resize(count < r.events.size() ? count : r.events.size());
        return r;
    }
    IoxWaitSet* ws_;
    std::size_t attached_;
};

/// Settings of a request-response service (0: the default).
struct RequestResponseOptions {
    const char* root = nullptr;
    std::uint32_t max_clients = 0;
    std::uint32_t max_servers = 0;
    std::uint32_t max_active_requests_per_client = 0;
    std::uint32_t max_response_buffer = 0;
    /// Attributes to record when creating (not compared on open).
    std::vector<Attribute> attributes{};
    /// Attributes an existing service must have when opening (a call that may create
    /// must record them too).
    std::vector<RequiredAttribute> required_attributes{};
};

template <class Req, class Resp>
class Client;
template <class Req, class Resp>
class Server;
template <class Req, class Resp>
class Pending;

/// A received response; released when dropped.
template <class Resp>
class Response {
public:
    Response(Response&& o) noexcept : port_(std::exchange(o.port_, nullptr)), raw_(std::exchange(o.raw_, {})) {}
    Response& operator=(Response&& o) noexcept {
        if (this != &o) {
            release();
            port_ = std::exchange(o.port_, nullptr);
            raw_ = std::exchange(o.raw_, {});
        }
        return *this;
    }
    Response(const Response&) = delete;
    Response& operator=(const Response&) = delete;
    ~Response() { release(); }

    const Resp* get() const { return static_cast<const Resp*>(raw_.data); }
    const Resp& operator*() const { return *get(); }
    const Resp* operator->() const { return get(); }

private:
    template <class, class>
    friend class Pending;
    Response(IoxClient* port, IoxSample raw) : port_(port), raw_(raw) {}
    void release() {
        if (port_ != nullptr) iox_client_release(std::exchange(port_, nullptr), std::exchange(raw_, {}).id);
    }
    IoxClient* port_;
    IoxSample raw_;
};

/// The stream of responses to one request; dropping it abandons the request.
template <class Req, class Resp>
class Pending {
public:
    Pending(Pending&& o) noexcept : port_(std::exchange(o.port_, nullptr)), id_(o.id_), finished_(o.finished_) {}
    Pending& operator=(Pending&& o) noexcept {
        if (this != &o) {
            drop();
            port_ = std::exchange(o.port_, nullptr);
            id_ = o.id_;
            finished_ = o.finished_;
        }
        return *this;
    }
    Pending(const Pending&) = delete;
    Pending& operator=(const Pending&) = delete;
    ~Pending() { drop(); }

    /// The next response, waiting up to `timeout` (0: only looks); none once the
    /// stream ended (`finished()`).
    Result<std::optional<Response<Resp>>> receive_for(std::chrono::nanoseconds timeout) {
        IoxSample raw{};
        bool got = false;
        IoxStatus s = iox_client_receive(port_, id_, timeout.count() > 0 ? static_cast<std::uint64_t>(timeout.count()) : 0,
                                         &raw, &got, &finished_);
        if (s != IOX_STATUS_OK) return Error::last(s);
        if (!got) return std::optional<Response<Resp>>();
        return std::optional<Response<Resp>>(Response<Resp>(port_, raw));
    }

    /// Whether the stream had ended at the last receive (no response will come).
    bool finished() const { return finished_; }

private:
    template <class, class>
    friend class RequestLoan;
    template <class, class>
    friend class Client;
    Pending(IoxClient* port, std::uint64_t id) : port_(port), id_(id), finished_(false) {}
    void drop() {
        if (port_ != nullptr) iox_client_drop_pending(std::exchange(port_, nullptr), id_);
    }
    IoxClient* port_;
    std::uint64_t id_;
    bool finished_;
};

/// A loaned request, written in place; given back unsent when dropped.
template <class Req, class Resp>
class RequestLoan {
public:
    RequestLoan(RequestLoan&& o) noexcept : port_(std::exchange(o.port_, nullptr)), loan_(std::exchange(o.loan_, {})) {}
    RequestLoan& operator=(RequestLoan&& o) noexcept {
        if (this != &o) {
            discard();
            port_ = std::exchange(o.port_, nullptr);
            loan_ = std::exchange(o.loan_, {});
        }
        return *this;
    }
    RequestLoan(const RequestLoan&) = delete;
    RequestLoan& operator=(const RequestLoan&) = delete;
    ~RequestLoan() { discard(); }

    Req* get() { return static_cast<Req*>(loan_.data); }
    Req& operator*() { return *get(); }
    Req* operator->() { return get(); }

    /// Sends the request (fully written) to one server.
    Result<Pending<Req, Resp>> send() && {
        std::uint64_t pending = 0;
        IoxClient* port = std::exchange(port_, nullptr);
        IoxStatus s = iox_client_send(port, std::exchange(loan_, {}).id, &pending);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return Pending<Req, Resp>(port, pending);
    }

private:
    template <class, class>
    friend class Client;
    RequestLoan(IoxClient* port, IoxLoan loan) : port_(port), loan_(loan) {}
    void discard() {
        if (port_ != nullptr) iox_client_discard(std::exchange(port_, nullptr), std::exchange(loan_, {}).id);
    }
    IoxClient* port_;
    IoxLoan loan_;
};

/// Sends requests (use it from its thread).
template <class Req, class Resp>
class Client {
public:
    Client(Client&& o) noexcept : port_(std::exchange(o.port_, nullptr)) {}
    Client& operator=(Client&& o) noexcept {
        if (this != &o) {
            if (port_ != nullptr) iox_client_drop(port_);
            port_ = std::exchange(o.port_, nullptr);
        }
        return *this;
    }
    Client(const Client&) = delete;
    Client& operator=(const Client&) = delete;
    ~Client() {
        if (port_ != nullptr) iox_client_drop(port_);
    }

    Result<RequestLoan<Req, Resp>> loan() {
        IoxLoan l{};
        IoxStatus s = iox_client_loan(port_, sizeof(Req), &l);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return RequestLoan<Req, Resp>(port_, l);
    }

    /// Loans, copies `request` in and sends it.
    Result<Pending<Req, Resp>> send_copy(const Req& request) {
        auto l = loan();
        if (!l) return l.error();
        *l.value() = request;
        return std::move(l.value()).send();
    }

    /// The readiness descriptor (responses may have arrived; owned by the client).
    Result<int> fd() const {
        int fd = -1;
        IoxStatus s = iox_client_fd(port_, &fd);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return fd;
    }

private:
    template <class, class>
    friend class RequestResponse;
    explicit Client(IoxClient* port) : port_(port) {}
    IoxClient* port_;
};

/// A loaned response, written in place; given back unsent when dropped.
template <class Resp>
class ResponseLoan {
public:
    ResponseLoan(ResponseLoan&& o) noexcept : port_(std::exchange(o.port_, nullptr)), loan_(std::exchange(o.loan_, {})) {}
    ResponseLoan& operator=(ResponseLoan&& o) noexcept {
        if (this != &o) {
            discard();
            port_ = std::exchange(o.port_, nullptr);
            loan_ = std::exchange(o.loan_, {});
        }
        return *this;
    }
    ResponseLoan(const ResponseLoan&) = delete;
    ResponseLoan& operator=(const ResponseLoan&) = delete;
    ~ResponseLoan() { discard(); }

    Resp* get() { return static_cast<Resp*>(loan_.data); }
    Resp& operator*() { return *get(); }
    Resp* operator->() { return get(); }

    /// Sends the response (fully written) to the client that asked.
    Result<bool> send() && {
        IoxStatus s = iox_server_send(std::exchange(port_, nullptr), std::exchange(loan_, {}).id);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return true;
    }

private:
    template <class, class>
    friend class ActiveRequest;
    ResponseLoan(IoxServer* port, IoxLoan loan) : port_(port), loan_(loan) {}
    void discard() {
        if (port_ != nullptr) iox_server_discard(std::exchange(port_, nullptr), std::exchange(loan_, {}).id);
    }
    IoxServer* port_;
    IoxLoan loan_;
};

/// A request being handled; respond any number of times; dropping it ends the stream.
template <class Req, class Resp>
class ActiveRequest {
public:
    ActiveRequest(ActiveRequest&& o) noexcept : port_(std::exchange(o.port_, nullptr)), raw_(std::exchange(o.raw_, {})) {}
    ActiveRequest& operator=(ActiveRequest&& o) noexcept {
        if (this != &o) {
            finish();
            port_ = std::exchange(o.port_, nullptr);
            raw_ = std::exchange(o.raw_, {});
        }
        return *this;
    }
    ActiveRequest(const ActiveRequest&) = delete;
    ActiveRequest& operator=(const ActiveRequest&) = delete;
    ~ActiveRequest() { finish(); }

    const Req* get() const { return static_cast<const Req*>(raw_.data); }
    const Req& operator*() const { return *get(); }
    const Req* operator->() const { return get(); }

    Result<ResponseLoan<Resp>> loan() {
        IoxLoan l{};
        IoxStatus s = iox_server_loan(port_, raw_.id, sizeof(Resp), &l);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return ResponseLoan<Resp>(port_, l);
    }

    /// Loans, copies `response` in and sends it.
    Result<bool> respond(const Resp& response) {
        auto l = loan();
        if (!l) return l.error();
        *l.value() = response;
        return std::move(l.value()).send();
    }

private:
    template <class, class>
    friend class Server;
    ActiveRequest(IoxServer* port, IoxSample raw) : port_(port), raw_(raw) {}
    void finish() {
        if (port_ != nullptr) iox_server_finish(std::exchange(port_, nullptr), std::exchange(raw_, {}).id);
    }
    IoxServer* port_;
    IoxSample raw_;
};

/// Takes requests (use it from its thread).
template <class Req, class Resp>
class Server {
public:
    Server(Server&& o) noexcept : port_(std::exchange(o.port_, nullptr)) {}
    Server& operator=(Server&& o) noexcept {
        if (this != &o) {
            if (port_ != nullptr) iox_server_drop(port_);
            port_ = std::exchange(o.port_, nullptr);
        }
        return *this;
    }
    Server(const Server&) = delete;
    Server& operator=(const Server&) = delete;
    ~Server() {
        if (port_ != nullptr) iox_server_drop(port_);
    }

    /// The next request, waiting up to `timeout` (0: only looks), sleeping.
    Result<std::optional<ActiveRequest<Req, Resp>>> receive_for(std::chrono::nanoseconds timeout) {
        IoxSample raw{};
        bool got = false;
        IoxStatus s = iox_server_receive(port_, timeout.count() > 0 ? static_cast<std::uint64_t>(timeout.count()) : 0,
                                         &raw, &got);
        if (s != IOX_STATUS_OK) return Error::last(s);
        if (!got) return std::optional<ActiveRequest<Req, Resp>>();
        return std::optional<ActiveRequest<Req, Resp>>(ActiveRequest<Req, Resp>(port_, raw));
    }

    /// The readiness descriptor (readable when a request waits; owned by the server).
    Result<int> fd() const {
        int fd = -1;
        IoxStatus s = iox_server_fd(port_, &fd);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return fd;
    }

private:
    template <class, class>
    friend class RequestResponse;
    explicit Server(IoxServer* port) : port_(port) {}
    IoxServer* port_;
};

/// A request-response service with request type `Req` and response type `Resp`.
template <class Req, class Resp>
class RequestResponse {
public:
    static Result<RequestResponse> open_or_create(const std::string& name, const RequestResponseOptions& o = {}) {
        return open(name, IOX_OPEN_OR_CREATE, o);
    }
    static Result<RequestResponse> open_existing(const std::string& name, const RequestResponseOptions& o = {}) {
        return open(name, IOX_OPEN, o);
    }
    static Result<RequestResponse> create(const std::string& name, const RequestResponseOptions& o = {}) {
        return open(name, IOX_CREATE, o);
    }

    RequestResponse(RequestResponse&& o) noexcept : service_(std::exchange(o.service_, nullptr)) {}
    RequestResponse& operator=(RequestResponse&& o) noexcept {
        if (this != &o) {
            if (service_ != nullptr) iox_request_response_service_drop(service_);
            service_ = std::exchange(o.service_, nullptr);
        }
        return *this;
    }
    RequestResponse(const RequestResponse&) = delete;
    RequestResponse& operator=(const RequestResponse&) = delete;
    ~RequestResponse() {
        if (service_ != nullptr) iox_request_response_service_drop(service_);
    }

    /// The attributes the service's creator recorded, sorted by key.
    Result<std::vector<Attribute>> attributes() const {
        return detail::read_attributes(service_, iox_request_response_attribute_count, iox_request_response_attribute);
    }

    /// The value of attribute `key`, or std::nullopt if the service has none.
    Result<std::optional<std::string>> attribute(const std::string& key) const {
        return detail::read_attribute(service_, key, iox_request_response_attribute_get);
    }

    Result<Client<Req, Resp>> client(bool pin_memory = false) {
        IoxClient* p = nullptr;
        IoxStatus s = iox_client_create(service_, pin_memory, &p);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return Client<Req, Resp>(p);
    }

    Result<Server<Req, Resp>> server(bool pin_memory = false) {
        IoxServer* p = nullptr;
        IoxStatus s = iox_server_create(service_, pin_memory, &p);
        if (s != IOX_STATUS_OK) return Error::last(s);
        return Server<Req, Resp>(p);
    }

private:
    explicit RequestResponse(IoxRequestResponseService* s) : service_(s) {}
    static Result<RequestResponse> open(const std::string& name, std::uint32_t mode, const RequestResponseOptions& o) {
        IoxRequestResponseOptions opts;
        iox_request_response_options_init(&opts);
        opts.root = o.root;
        opts.request = type_of<Req>();
        opts.response = type_of<Resp>();
        opts.max_clients = o.max_clients;
        opts.max_servers = o.max_servers;
        opts.max_active_requests_per_client = o.max_active_requests_per_client;
        opts.max_response_buffer = o.max_response_buffer;
        detail::AttributeArrays attributes(o.attributes, o.required_attributes);
        attributes.fill(opts);
        IoxRequestResponseService* s = nullptr;
        IoxStatus st = iox_request_response_open(name.c_str(), mode, &opts, &s);
        if (st != IOX_STATUS_OK) return Error::last(st);
        return RequestResponse(s);
    }
    IoxRequestResponseService* service_;
};

}  // namespace iox

#endif  // IOX_HPP
