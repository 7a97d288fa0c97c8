/* SPDX-License-Identifier: MIT */

/*
 * The TCP listener's TLS material. Either the user's certificate and key
 * (--tls-cert, --tls-key: any address may then be served), or a private CA
 * and a serving certificate that tendd makes at its first start and keeps in
 * STATE_DIR/tls/ (loopback only). The serving certificate names the listen
 * address and `localhost`; it is made again, signed by the same CA, when the
 * address changes or a month before it expires, so a kubeconfig made once
 * stays good. The bearer token, when no --token-file is given, is made and
 * kept there too.
 *
 * Keys are ECDSA P-256; certificates are signed with SHA-256. Files are
 * written to a temporary name and renamed, keys 0600 in a 0700 directory.
 */

#include <fcntl.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api-internal.h"

#define DAY (24 * 3600)
#define CA_DAYS (10 * 365)
#define SERVER_DAYS 365
#define RENEW_DAYS 30

static int write_file_atomic(const char *path, const char *data, size_t len, mode_t mode) {
        _cleanup_free_ char *tmp = strprintf("%s.tmp", path);
        int fd, r = 0;

        if (!tmp)
                return -ENOMEM;
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
        if (fd < 0)
                return -errno;
        for (size_t off = 0; off < len && r == 0;) {
                ssize_t n = write(fd, data + off, len - off);
                if (n < 0 && errno != EINTR)
                        r = -errno;
                else if (n > 0)
                        off += (size_t) n;
        }
        if (r == 0 && fsync(fd) < 0)
                r = -errno;
        close(fd);
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0)
                (void) unlink(tmp);
        return r;
}

static int gnutls_errno(int g) {
        return g == GNUTLS_E_MEMORY_ERROR ? -ENOMEM : -EIO;
}

static int read_pem(const char *path, gnutls_datum_t *ret) {
        char *data;
        size_t n;
        int r = read_full_file(path, 1 << 20, &data, &n);

        if (r < 0)
                return r;
        ret->data = (unsigned char *) data;
        ret->size = (unsigned) n;
        return 0;
}

static int export_pem(int (*export)(void *, gnutls_x509_crt_fmt_t, gnutls_datum_t *), void *what,
                      char **ret) {
        gnutls_datum_t d = {};
        int g = export(what, GNUTLS_X509_FMT_PEM, &d);

        if (g < 0)
                return gnutls_errno(g);
        *ret = strndup((const char *) d.data, d.size);
        gnutls_free(d.data);
        return *ret ? 0 : -ENOMEM;
}

static int export_crt(void *c, gnutls_x509_crt_fmt_t f, gnutls_datum_t *d) {
        return gnutls_x509_crt_export2(c, f, d);
}

static int export_key(void *k, gnutls_x509_crt_fmt_t f, gnutls_datum_t *d) {
        return gnutls_x509_privkey_export2(k, f, d);
}

/* A certificate for key, signed by issuer (NULL: by itself). */
static int make_cert(gnutls_x509_privkey_t key, const char *cn, const unsigned char *ip,
                     gnutls_x509_crt_t issuer, gnutls_x509_privkey_t issuer_key, unsigned days,
                     gnutls_x509_crt_t *ret) {
        gnutls_x509_crt_t c;
        unsigned char serial[16], id[64];
        size_t id_len = sizeof id;
        time_t now = time(NULL);
        int g;

        g = gnutls_x509_crt_init(&c);
        if (g < 0)
                return gnutls_errno(g);
        g = gnutls_rnd(GNUTLS_RND_NONCE, serial, sizeof serial);
        serial[0] &= 0x7f; /* positive */
        if (g >= 0)
                g = gnutls_x509_crt_set_version(c, 3);
        if (g >= 0)
                g = gnutls_x509_crt_set_serial(c, serial, sizeof serial);
        if (g >= 0)
                g = gnutls_x509_crt_set_activation_time(c, now - 3600);
        if (g >= 0)
                g = gnutls_x509_crt_set_expiration_time(c, now + (time_t) days * DAY);
        if (g >= 0)
                g = gnutls_x509_crt_set_dn_by_oid(c, GNUTLS_OID_X520_COMMON_NAME, 0, cn,
                                                  (unsigned) strlen(cn));
        if (g >= 0)
                g = gnutls_x509_crt_set_key(c, key);
        if (g >= 0)
                g = gnutls_x509_crt_set_basic_constraints(c, !issuer, -1);
        if (g >= 0)
                g = gnutls_x509_crt_set_key_usage(c, issuer ? GNUTLS_KEY_DIGITAL_SIGNATURE
                                                            : GNUTLS_KEY_KEY_CERT_SIGN |
                                                                      GNUTLS_KEY_CRL_SIGN);
        if (g >= 0)
                g = gnutls_x509_crt_get_key_id(c, 0, id, &id_len);
        if (g >= 0)
                g = gnutls_x509_crt_set_subject_key_id(c, id, id_len);
        if (g >= 0 && issuer) {
                id_len = sizeof id;
                g = gnutls_x509_crt_get_subject_key_id(issuer, id, &id_len, NULL);
                if (g >= 0)
                        g = gnutls_x509_crt_set_authority_key_id(c, id, id_len);
                if (g >= 0)
                        g = gnutls_x509_crt_set_key_purpose_oid(c, GNUTLS_KP_TLS_WWW_SERVER, 0);
                if (g >= 0)
                        g = gnutls_x509_crt_set_subject_alt_name(c, GNUTLS_SAN_DNSNAME, "localhost",
                                                                 9, GNUTLS_FSAN_APPEND);
                if (g >= 0)
                        g = gnutls_x509_crt_set_subject_alt_name(c, GNUTLS_SAN_IPADDRESS, ip, 4,
                                                                 GNUTLS_FSAN_APPEND);
        }
        if (g >= 0)
                g = gnutls_x509_crt_sign2(c, issuer ?: c, issuer_key ?: key, GNUTLS_DIG_SHA256, 0);
        if (g < 0) {
                gnutls_x509_crt_deinit(c);
                return gnutls_errno(g);
        }
        *ret = c;
        return 0;
}

static int new_key(gnutls_x509_privkey_t *ret) {
        int g = gnutls_x509_privkey_init(ret);

        if (g >= 0)
                g = gnutls_x509_privkey_generate(
                        *ret, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
        if (g < 0 && *ret) {
                gnutls_x509_privkey_deinit(*ret);
                *ret = NULL;
        }
        return g < 0 ? gnutls_errno(g) : 0;
}

/* The CA in dir: read, or made (and written) when there is none. */
static int load_ca(const char *dir, gnutls_x509_crt_t *ret_crt, gnutls_x509_privkey_t *ret_key,
                   char **ret_pem, char **ret_error) {
        _cleanup_free_ char *crt_path = strprintf("%s/ca.crt", dir),
                            *key_path = strprintf("%s/ca.key", dir), *key_pem = NULL;
        gnutls_datum_t crt_d = {}, key_d = {};
        gnutls_x509_crt_t crt = NULL;
        gnutls_x509_privkey_t key = NULL;
        int r;

        if (!crt_path || !key_path)
                return -ENOMEM;
        r = read_pem(crt_path, &crt_d);
        if (r >= 0)
                r = read_pem(key_path, &key_d);
        if (r >= 0) {
                if (gnutls_x509_crt_init(&crt) < 0 || gnutls_x509_privkey_init(&key) < 0 ||
                    gnutls_x509_crt_import(crt, &crt_d, GNUTLS_X509_FMT_PEM) < 0 ||
                    gnutls_x509_privkey_import(key, &key_d, GNUTLS_X509_FMT_PEM) < 0) {
                        *ret_error = strprintf("%s or %s cannot be read as PEM; move %s away and "
                                               "tendd makes a new CA (kubeconfigs made before "
                                               "then stop working)",
                                               crt_path, key_path, dir);
                        r = -EINVAL;
                } else
                        *ret_pem = strndup((const char *) crt_d.data, crt_d.size);
                free(crt_d.data);
                free(key_d.data);
                if (r >= 0 && !*ret_pem)
                        r = -ENOMEM;
        } else if (r == -ENOENT) {
                free(crt_d.data);
                r = new_key(&key);
                if (r >= 0)
                        r = make_cert(key, "tend CA", NULL, NULL, NULL, CA_DAYS, &crt);
                if (r >= 0)
                        r = export_pem(export_crt, crt, ret_pem);
                if (r >= 0)
                        r = export_pem(export_key, key, &key_pem);
                if (r >= 0)
                        r = write_file_atomic(key_path, key_pem, strlen(key_pem), 0600);
                if (r >= 0)
                        r = write_file_atomic(crt_path, *ret_pem, strlen(*ret_pem), 0644);
                if (r < 0 && r != -ENOMEM)
                        *ret_error = strprintf("cannot make a CA in %s: %s", dir, strerror(-r));
                if (r >= 0)
                        log_info("tls: made a CA in %s", crt_path);
        } else
                *ret_error = strprintf("cannot read %s: %s", crt_path, strerror(-r));
        if (r < 0) {
                if (crt)
                        gnutls_x509_crt_deinit(crt);
                if (key)
                        gnutls_x509_privkey_deinit(key);
                free(*ret_pem);
                *ret_pem = NULL;
                return r;
        }
        *ret_crt = crt;
        *ret_key = key;
        return 0;
}

/* The serving certificate in dir, if it is still good for ip. */
static bool server_cert_good(const char *crt_path, const char *key_path, const unsigned char *ip,
                             gnutls_x509_crt_t ca) {
        gnutls_datum_t d = {};
        gnutls_x509_crt_t c = NULL;
        unsigned status = 0;
        bool good = false;

        if (access(key_path, R_OK) < 0 || read_pem(crt_path, &d) < 0)
                return false;
        if (gnutls_x509_crt_init(&c) >= 0 &&
            gnutls_x509_crt_import(c, &d, GNUTLS_X509_FMT_PEM) >= 0 &&
            gnutls_x509_crt_verify(c, &ca, 1, 0, &status) >= 0 && status == 0 &&
            gnutls_x509_crt_check_ip(c, ip, 4, 0) &&
            gnutls_x509_crt_get_expiration_time(c) > time(NULL) + RENEW_DAYS * DAY)
                good = true;
        if (c)
                gnutls_x509_crt_deinit(c);
        free(d.data);
        return good;
}

static int make_server_cert(const char *dir, const unsigned char *ip, gnutls_x509_crt_t ca,
                            gnutls_x509_privkey_t ca_key, char **ret_cert, char **ret_key) {
        _cleanup_free_ char *crt_path = strprintf("%s/server.crt", dir),
                            *key_path = strprintf("%s/server.key", dir);
        gnutls_x509_privkey_t key = NULL;
        gnutls_x509_crt_t crt = NULL;
        int r;

        if (!crt_path || !key_path)
                return -ENOMEM;
        if (server_cert_good(crt_path, key_path, ip, ca)) {
                size_t n;
                r = read_full_file(crt_path, 1 << 20, ret_cert, &n);
                if (r >= 0)
                        r = read_full_file(key_path, 1 << 20, ret_key, &n);
                return r;
        }
        r = new_key(&key);
        if (r >= 0)
                r = make_cert(key, "tendd", ip, ca, ca_key, SERVER_DAYS, &crt);
        if (r >= 0)
                r = export_pem(export_crt, crt, ret_cert);
        if (r >= 0)
                r = export_pem(export_key, key, ret_key);
        if (r >= 0)
                r = write_file_atomic(key_path, *ret_key, strlen(*ret_key), 0600);
        if (r >= 0)
                r = write_file_atomic(crt_path, *ret_cert, strlen(*ret_cert), 0644);
        if (crt)
                gnutls_x509_crt_deinit(crt);
        if (key)
                gnutls_x509_privkey_deinit(key);
        if (r >= 0)
                log_info("tls: made a serving certificate for %u.%u.%u.%u and localhost in %s",
                         ip[0], ip[1], ip[2], ip[3], crt_path);
        return r;
}

static int make_dir(const char *state_dir, char **ret, char **ret_error) {
        _cleanup_free_ char *dir = strprintf("%s/tls", state_dir);
        struct stat st;

        if (!dir)
                return -ENOMEM;
        if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
                int r = -errno;
                *ret_error = strprintf("cannot make %s: %s", dir, strerror(-r));
                return r;
        }
        if (stat(dir, &st) == 0 && (st.st_mode & 077)) {
                *ret_error = strprintf("%s is open to other users (mode %04o): chmod 0700 %s", dir,
                                       (unsigned) (st.st_mode & 07777), dir);
                return -EPERM;
        }
        *ret = TAKE_PTR(dir);
        return 0;
}

int api__tls_generate(const char *state_dir, const unsigned char ip[4], api_tls *ret,
                      char **ret_error) {
        _cleanup_free_ char *dir = NULL;
        gnutls_x509_crt_t ca = NULL;
        gnutls_x509_privkey_t ca_key = NULL;
        int r;

        r = make_dir(state_dir, &dir, ret_error);
        if (r < 0)
                return r;
        r = load_ca(dir, &ca, &ca_key, &ret->ca_pem, ret_error);
        if (r < 0)
                return r;
        r = make_server_cert(dir, ip, ca, ca_key, &ret->cert_pem, &ret->key_pem);
        if (r < 0 && r != -ENOMEM && !*ret_error)
                *ret_error = strprintf("cannot make a serving certificate in %s: %s", dir,
                                       strerror(-r));
        gnutls_x509_crt_deinit(ca);
        gnutls_x509_privkey_deinit(ca_key);
        return r;
}

int api__tls_load(const char *cert_file, const char *key_file, api_tls *ret, char **ret_error) {
        gnutls_datum_t c = {}, k = {};
        gnutls_certificate_credentials_t cred = NULL;
        size_t n;
        int r, g;

        r = read_full_file(cert_file, 1 << 20, &ret->cert_pem, &n);
        if (r < 0) {
                *ret_error = strprintf("--tls-cert %s: %s", cert_file, strerror(-r));
                return r;
        }
        r = read_full_file(key_file, 1 << 20, &ret->key_pem, &n);
        if (r < 0) {
                *ret_error = strprintf("--tls-key %s: %s", key_file, strerror(-r));
                return r;
        }
        /* The pair is checked now, not at the first client's handshake. */
        c = (gnutls_datum_t){ (unsigned char *) ret->cert_pem, (unsigned) strlen(ret->cert_pem) };
        k = (gnutls_datum_t){ (unsigned char *) ret->key_pem, (unsigned) strlen(ret->key_pem) };
        g = gnutls_certificate_allocate_credentials(&cred);
        if (g >= 0)
                g = gnutls_certificate_set_x509_key_mem(cred, &c, &k, GNUTLS_X509_FMT_PEM);
        if (cred)
                gnutls_certificate_free_credentials(cred);
        if (g < 0) {
                *ret_error = strprintf("--tls-cert %s and --tls-key %s: %s (PEM files of one "
                                       "certificate and its key are expected)",
                                       cert_file, key_file, gnutls_strerror(g));
                return -EINVAL;
        }
        return 0;
}

int api__tls_token(const char *state_dir, char **ret, char **ret_error) {
        _cleanup_free_ char *dir = NULL, *path = NULL;
        unsigned char raw[24];
        size_t n;
        int r;

        r = make_dir(state_dir, &dir, ret_error);
        if (r < 0)
                return r;
        path = strprintf("%s/token", dir);
        if (!path)
                return -ENOMEM;
        r = read_full_file(path, 4096, ret, &n);
        if (r >= 0) {
                while (n > 0 && ((*ret)[n - 1] == '\n' || (*ret)[n - 1] == ' '))
                        (*ret)[--n] = 0;
                if (n >= 16)
                        return 0;
                free(*ret);
                *ret = NULL;
        } else if (r != -ENOENT) {
                *ret_error = strprintf("cannot read %s: %s", path, strerror(-r));
                return r;
        }
        if (gnutls_rnd(GNUTLS_RND_KEY, raw, sizeof raw) < 0)
                return -EIO;
        *ret = malloc(2 * sizeof raw + 2);
        if (!*ret)
                return -ENOMEM;
        for (size_t i = 0; i < sizeof raw; i++)
                sprintf(*ret + 2 * i, "%02x", raw[i]);
        r = write_file_atomic(path, *ret, 2 * sizeof raw, 0600);
        if (r < 0) {
                *ret_error = strprintf("cannot write %s: %s", path, strerror(-r));
                free(*ret);
                *ret = NULL;
                return r;
        }
        log_info("tls: made a bearer token in %s", path);
        return 0;
}

void api__tls_done(api_tls *t) {
        free(t->cert_pem);
        free(t->key_pem);
        free(t->ca_pem);
        *t = (api_tls){};
}

char *api__base64(const char *data, size_t len) {
        gnutls_datum_t in = { (unsigned char *) data, (unsigned) len }, out = {};
        char *s;

        if (gnutls_base64_encode2(&in, &out) < 0)
                return NULL;
        s = strndup((const char *) out.data, out.size);
        gnutls_free(out.data);
        return s;
}
