//! ServiceEntry ports that need addresses, istioctl's `serviceentry.ProtocolAddressesAnalyzer`
//! (IST0134): a TCP (or protocol-less) port without `addresses` is one listener for every such
//! ServiceEntry on that port, unless the proxies allocate addresses themselves.

use super::{Code, Input, Message};
use crate::istio::Spec;

pub(super) fn analyze(input: &Input, out: &mut Vec<Message>) {
    if input.dns_auto_allocate {
        return;
    }
    for (c, se) in input.each(|s| match s {
        Spec::ServiceEntry(s) => Some(s),
        _ => None,
    }) {
        if !se.addresses.is_empty() {
            continue;
        }
        for port in se
            .ports
            .iter()
            .filter(|p| p.protocol.is_empty() || p.protocol.eq_ignore_ascii_case("TCP"))
        {
            out.push(Message::new(
                Code::ServiceEntryAddressesRequired,
                &c.object_ref(),
                format!(
                    "ServiceEntry addresses are required for this protocol (port {} {}).",
                    port.number,
                    if port.protocol.is_empty() {
                        "without a protocol"
                    } else {
                        "TCP"
                    }
                ),
            ));
        }
    }
}
