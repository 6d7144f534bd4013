/**
 * A self-signed certificate for 127.0.0.1 and localhost (valid 2000–2099), used when the fake serves HTTPS. The key
 * is a test fixture for loopback only, not a secret. HTTPS matters because kubectl (client-go) sends bearer tokens
 * only over TLS, so RBAC tests that run kubectl need it.
 */
export const CERTIFICATE = `
-----BEGIN CERTIFICATE-----
MIIBjTCCATKgAwIBAgIBATAKBggqhkjOPQQDAjAUMRIwEAYDVQQDDAlmYWtlLWt1
YmUwIBcNMDAwMTAxMDAwMDAwWhgPMjA5OTEyMzEwMDAwMDBaMBQxEjAQBgNVBAMM
CWZha2Uta3ViZTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABB3lT5RUp25WDTrR
6YBFZm1OjRkxAtyUL7wvDReYGQG1QzacIy8q9Au4Ps9usFSFtY+ab2vJ2p4Zg9VM
O0ZCczmjczBxMBoGA1UdEQQTMBGHBH8AAAGCCWxvY2FsaG9zdDAPBgNVHRMBAf8E
BTADAQH/MA4GA1UdDwEB/wQEAwIChDATBgNVHSUEDDAKBggrBgEFBQcDATAdBgNV
HQ4EFgQUtNrSHt+h9JD81HSRp3UHEZ7EkN8wCgYIKoZIzj0EAwIDSQAwRgIhAPSM
wCfNoLn7xMSUR63riFmvMKChnu9si7akzVb1+omxAiEArDffi1u2G8vGcgDyAh/G
nGfV8Z9OU3goRtlSgjQkNdk=
-----END CERTIFICATE-----
`.trimStart();

export const PRIVATE_KEY = `
-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgfjdQ4bLagx1X2uKj
UjN7dTTLleeZ04AbACAEd0bgI1+hRANCAAQd5U+UVKduVg060emARWZtTo0ZMQLc
lC+8Lw0XmBkBtUM2nCMvKvQLuD7PbrBUhbWPmm9rydqeGYPVTDtGQnM5
-----END PRIVATE KEY-----
`.trimStart();
