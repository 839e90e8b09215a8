/* A C server: `c_server ROOT SERVICE N` serves N requests (Reading) with two u64
 * responses each, seq * 10 and seq * 10 + 1, then finishes each request; it checks
 * that a response loan sent twice and a loan on a finished request are refused. Prints
 * "ready" once its server exists and "served N" at the end. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "iox.h"
#include "reading.h"

#define SECOND 1000000000ull

static int die(const char* what, IoxStatus s) {
    fprintf(stderr, "c_server: %s: %s: %s\n", what, iox_status_name(s), iox_last_error());
    return 1;
}

int main(int argc, char** argv) {
    if (argc != 4) return fprintf(stderr, "usage: c_server ROOT SERVICE N\n"), 2;
    uint64_t n = strtoull(argv[3], NULL, 10);
    IoxRequestResponseOptions o;
    iox_request_response_options_init(&o);
    o.root = argv[1];
    o.request.name = READING_NAME;
    o.request.size = sizeof(Reading);
    o.request.alignment = _Alignof(Reading);
    o.request.any_bit_pattern = true;
    o.response.name = "u64";
    o.response.size = sizeof(uint64_t);
    o.response.alignment = _Alignof(uint64_t);
    o.response.any_bit_pattern = true;
    IoxRequestResponseService* service = NULL;
    IoxStatus s = iox_request_response_open(argv[2], IOX_OPEN_OR_CREATE, &o, &service);
    if (s != IOX_STATUS_OK) return die("open", s);
    IoxServer* server = NULL;
    if ((s = iox_server_create(service, false, &server)) != IOX_STATUS_OK) return die("server", s);
    printf("ready\n");
    fflush(stdout);
    for (uint64_t served = 0; served < n;) {
        IoxSample request;
        bool got = false;
        if ((s = iox_server_receive(server, 10 * SECOND, &request, &got)) != IOX_STATUS_OK) return die("receive", s);
        if (!got) return fprintf(stderr, "c_server: no request within 10 s\n"), 1;
        uint64_t seq = ((const Reading*)request.data)->seq;
        for (uint64_t k = 0; k < 2; k++) {
            IoxLoan loan;
            if ((s = iox_server_loan(server, request.id, sizeof(uint64_t), &loan)) != IOX_STATUS_OK) return die("loan", s);
            *(uint64_t*)loan.data = seq * 10 + k;
            if ((s = iox_server_send(server, loan.id)) != IOX_STATUS_OK) return die("send", s);
            if (iox_server_send(server, loan.id) != IOX_STATUS_STALE_HANDLE)
                return fprintf(stderr, "c_server: a response loan was sent twice\n"), 1;
        }
        if ((s = iox_server_finish(server, request.id)) != IOX_STATUS_OK) return die("finish", s);
        IoxLoan late;
        if (iox_server_loan(server, request.id, sizeof(uint64_t), &late) != IOX_STATUS_STALE_HANDLE)
            return fprintf(stderr, "c_server: a loan on a finished request\n"), 1;
        served++;
    }
    printf("served %" PRIu64 "\n", n);
    iox_server_drop(server);
    iox_request_response_service_drop(service);
    return 0;
}
