//! `InterfaceAdapter::endpoint`: an endpoint named by what it is given, not by position.

use crate::error::Result;
use crate::evd::Evd;
use crate::ia::InterfaceAdapter;
use crate::pz::Pz;
use crate::srq::Srq;
use crate::types::EpAttr;

use super::Endpoint;

/// The settings of an endpoint to create; [`build`](Self::build) creates it with the same
/// checks and errors as `dat_ep_create` (or `dat_ep_create_with_srq` when an SRQ is set).
#[must_use = "an EndpointBuilder does nothing until build() is called"]
#[derive(Clone)]
pub struct EndpointBuilder<'a> {
    ia: &'a InterfaceAdapter,
    pz: &'a Pz,
    recv_evd: Option<&'a Evd>,
    request_evd: Option<&'a Evd>,
    connect_evd: Option<&'a Evd>,
    srq: Option<&'a Srq>,
    attr: Option<EpAttr>,
}

impl InterfaceAdapter {
    /// Starts an endpoint in `pz`: name its EVDs, SRQ and attributes, then
    /// [`build`](EndpointBuilder::build). Unset EVDs are none (an endpoint without a
    /// connection EVD cannot connect); unset attributes are the defaults.
    ///
    /// ```no_run
    /// # use dapl::*;
    /// # fn f(ia: &InterfaceAdapter, pz: &Pz, dto: &Evd, conn: &Evd) -> Result<Endpoint> {
    /// ia.endpoint(pz).dto_evd(dto).connect_evd(conn).build()
    /// # }
    /// ```
    pub fn endpoint<'a>(&'a self, pz: &'a Pz) -> EndpointBuilder<'a> {
        EndpointBuilder {
            ia: self,
            pz,
            recv_evd: None,
            request_evd: None,
            connect_evd: None,
            srq: None,
            attr: None,
        }
    }
}

impl<'a> EndpointBuilder<'a> {
    /// The EVD for receive completions (a DTO EVD).
    pub fn recv_evd(mut self, evd: &'a Evd) -> Self {
        self.recv_evd = Some(evd);
        self
    }

    /// The EVD for send, RDMA and bind completions (a DTO EVD).
    pub fn request_evd(mut self, evd: &'a Evd) -> Self {
        self.request_evd = Some(evd);
        self
    }

    /// One EVD for both receive and request completions.
    pub fn dto_evd(self, evd: &'a Evd) -> Self {
        self.recv_evd(evd).request_evd(evd)
    }

    /// The EVD for connection events (a CONNECTION EVD).
    pub fn connect_evd(mut self, evd: &'a Evd) -> Self {
        self.connect_evd = Some(evd);
        self
    }

    /// Receives come from this shared receive queue instead of the endpoint's own.
    pub fn srq(mut self, srq: &'a Srq) -> Self {
        self.srq = Some(srq);
        self
    }

    /// Endpoint attributes (queue depths, ORD/IRD, ...).
    pub fn attr(mut self, attr: EpAttr) -> Self {
        self.attr = Some(attr);
        self
    }

    /// Creates the endpoint.
    pub fn build(self) -> Result<Endpoint> {
        let EndpointBuilder {
            ia,
            pz,
            recv_evd,
            request_evd,
            connect_evd,
            srq,
            attr,
        } = self;
        match srq {
            Some(srq) => {
                ia.ep_create_with_srq(pz, recv_evd, request_evd, connect_evd, srq, attr.as_ref())
            }
            None => ia.ep_create(pz, recv_evd, request_evd, connect_evd, attr.as_ref()),
        }
    }
}
