"""Service attributes on the builders: key-value strings a service's creator records,
that an opener can require (Rust's ``iox_service::attributes`` has the rules: a key is
1 to 128 bytes of printable ASCII without ``=`` or whitespace, a value at most 8192
bytes without control characters but newline and tab, at most 32 per service).

    svc = (iox.Service("chatter").publish_subscribe(np.uint64)
           .attribute("ros2/type", "std_msgs/msg/UInt64")      # recorded when creating
           .require_attribute("ros2/type", "std_msgs/msg/UInt64")  # checked when opening
           .open_or_create())
    svc.attributes            # {"ros2/type": "std_msgs/msg/UInt64"}

``attribute`` is recorded when the builder creates the service and not compared on
open; ``require_attribute`` / ``require_attribute_key`` are checked on open (a missing
or different attribute raises ``iox.IncompatibleService`` naming the key and both
values), and a builder that may create must record what it requires. Invalid keys or
values raise ``iox.Error`` when the builder opens or creates.
"""

from __future__ import annotations


class AttributeMethods:
    """The attribute methods of every builder (each keeps its options in ``_opts``)."""

    _opts: dict

    def attribute(self, key: str, value: str):
        """Records attribute ``key`` = ``value`` when this builder creates the service
        (a key given again replaces its value); not compared on open."""
        self._opts.setdefault("attributes", []).append((key, value))
        return self

    def require_attribute(self, key: str, value: str):
        """Requires an existing service to have attribute ``key`` with exactly
        ``value`` when opening."""
        self._opts.setdefault("required_attributes", []).append((key, value))
        return self

    def require_attribute_key(self, key: str):
        """Requires an existing service to have attribute ``key``, any value."""
        self._opts.setdefault("required_attributes", []).append((key, None))
        return self
