"""The jars that let Spark reach ``s3://`` through Hadoop's s3a filesystem, for the delta-spark
engine on a lake in S3: hadoop-aws, the AWS SDK v2 modules it needs (``s3``,
``s3-transfer-manager``, ``sts``) with their runtime dependencies, and the analytics input
stream's jar, minus what pyspark already ships (its ``hadoop-client-api``/``-runtime`` 3.5.0,
httpclient, commons-codec, slf4j and netty). The sha256 of each is the file Maven Central
serves (checked against Central's .sha1, and its .sha256 where it has one). Fetched by
``python -m backfill_assets.spark.delta_jars --s3a`` (``spark/delta_jars.py``) into ``.jars/s3a``.

The SDK's ``netty-nio-client`` is built for netty 4.1; pyspark ships 4.2. hadoop-aws uses it
(through the SDK's transfer manager) only to copy an object at or above
``fs.s3a.multipart.threshold`` (128 MiB by default; a rename is copies and deletes) and for
``copyFromLocalFile``; smaller copies take the synchronous Apache client. Both copies work on
a real server: ``lake/test_lake_s3a.py``.
"""

HADOOP_AWS_VERSION = "3.5.0"  # pyspark 4.2's hadoop-client-api/runtime
AAL_VERSION = "1.3.1"
AWS_SDK_VERSION = "2.35.4"  # hadoop-project 3.5.0's aws-java-sdk-v2.version

# File name -> (Maven coordinates, sha256 of the file Central serves).
S3A_JARS = {
    f"hadoop-aws-{HADOOP_AWS_VERSION}.jar": (
        f"org.apache.hadoop:hadoop-aws:{HADOOP_AWS_VERSION}",
        "66bd9eefb938b1a1657487324b63c13df2d8b17164a1dd24e0ef37b905bc5baa",
    ),
    f"analyticsaccelerator-s3-{AAL_VERSION}.jar": (
        f"software.amazon.s3.analyticsaccelerator:analyticsaccelerator-s3:{AAL_VERSION}",
        "4959a9747cbb479c73c3ffbcd479bee5b014f8b2880994585a8693fb9d24675e",
    ),
    f"annotations-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:annotations:{AWS_SDK_VERSION}",
        "6f36bd87155d1dd85d6efbdd29e532e3759a022211feb71affebee1aa34f04b8",
    ),
    f"apache-client-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:apache-client:{AWS_SDK_VERSION}",
        "6eade21b482724ed0a4613eaa95d20e47e7a81304bd28538ac427fece94a7740",
    ),
    f"arns-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:arns:{AWS_SDK_VERSION}",
        "c63cc29f76a8527e9e10b621703163df541dc5cb315508dc2898518602c75380",
    ),
    f"auth-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:auth:{AWS_SDK_VERSION}",
        "6b601323004833fb4a857ffc95db4795e0e6320eb93e64b1246c655c9ff04994",
    ),
    f"aws-core-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:aws-core:{AWS_SDK_VERSION}",
        "fdb5fc8f1a48d97fa7d04d3460fb42f6973c7b1bbe1b9d317871ef0162bcb623",
    ),
    f"aws-query-protocol-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:aws-query-protocol:{AWS_SDK_VERSION}",
        "9b4cf9b78977cc9f5b4ceae9c435dedbde6a055a0f8d9e053eaca945715e2a9f",
    ),
    f"aws-xml-protocol-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:aws-xml-protocol:{AWS_SDK_VERSION}",
        "4f59176da2522c357b1993e4a890fde529f12f365795ef86269bde4a3984cd0d",
    ),
    f"checksums-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:checksums:{AWS_SDK_VERSION}",
        "94464af4374d08ecf33ca06ed4d03e1615529e547726e26b56abacefbeee7948",
    ),
    f"checksums-spi-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:checksums-spi:{AWS_SDK_VERSION}",
        "88b5af85ac2d3c862be8856be4e683ab31932e4a5a3c1c45af864d2671ac7cec",
    ),
    f"crt-core-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:crt-core:{AWS_SDK_VERSION}",
        "2c6aaa17bf9ccbb9d962dded4351e73decb197e3c5519970e0dae17e05d3df62",
    ),
    f"endpoints-spi-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:endpoints-spi:{AWS_SDK_VERSION}",
        "ef02441bda916959b8341290b49c68cc35538e1ad6f8629b75d8334dc6653e00",
    ),
    f"http-auth-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:http-auth:{AWS_SDK_VERSION}",
        "3ec933a06e751a05e195eb3589209e23c44e1897263b6fcae34ef4cc63cd4491",
    ),
    f"http-auth-aws-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:http-auth-aws:{AWS_SDK_VERSION}",
        "c4acb92fdec90bfd9b67bfab8e41b69cd152c03cacc10281a8ab464791856e01",
    ),
    f"http-auth-aws-eventstream-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:http-auth-aws-eventstream:{AWS_SDK_VERSION}",
        "709107552f302be3fa9e05969a3779f5c0f07fb809e6fa1fa571a6f0c61326dd",
    ),
    f"http-auth-spi-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:http-auth-spi:{AWS_SDK_VERSION}",
        "4495463406bb98eb136f2c3f3604ed5f08ec9974ebc3f34f2121b20679f61d5c",
    ),
    f"http-client-spi-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:http-client-spi:{AWS_SDK_VERSION}",
        "728be89b2a07b595edb0adee3a2cbbbdd4cb1f4caddde0d08c3979fe2620dedb",
    ),
    f"identity-spi-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:identity-spi:{AWS_SDK_VERSION}",
        "188d73db7d4e2361654bc3c5a1b3eaeb445d0500fb012cc46c5d67975adf97bf",
    ),
    f"json-utils-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:json-utils:{AWS_SDK_VERSION}",
        "80d67a6bb3e7eb49c7d4b6e4ba4c1463ed7da0192b795158328602dc131c5ecc",
    ),
    f"metrics-spi-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:metrics-spi:{AWS_SDK_VERSION}",
        "c2a4ee90a21081317e2e6eba0c414d05d3d518aed2f86b1c1710a7367b450487",
    ),
    f"netty-nio-client-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:netty-nio-client:{AWS_SDK_VERSION}",
        "b82f8b33e5c85273a47da45ede884d7ccb31c9c2f69e6910a76c5c48fa1275dc",
    ),
    f"profiles-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:profiles:{AWS_SDK_VERSION}",
        "0f4ef7ca72ccd80dd49ebeaf7f3ce60a7d7a00da59a91aeeae6e91052bbacbd8",
    ),
    f"protocol-core-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:protocol-core:{AWS_SDK_VERSION}",
        "f2532eca6ba2142fe4821d5decb03c83a3e15dc8bfae2240e7f2efa75f9868b5",
    ),
    f"regions-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:regions:{AWS_SDK_VERSION}",
        "77eae87b34ce96ecdf916a9bc06684dbeafcb6d38ef0513285fa5d5d6d41f5ca",
    ),
    f"retries-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:retries:{AWS_SDK_VERSION}",
        "f99fb2f8c66d7e859955b3542d3af8f9de8f23a21d5e3250f0f2c5f18487e469",
    ),
    f"retries-spi-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:retries-spi:{AWS_SDK_VERSION}",
        "668638751d059c527ddd41ffa4dcebe36a7c14860ed56776df09b861c14dc7dd",
    ),
    f"s3-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:s3:{AWS_SDK_VERSION}",
        "f23532c5223be9b0bfec0d72837ed09ed34dbdf8022818ba145b20076a78b4bc",
    ),
    f"s3-transfer-manager-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:s3-transfer-manager:{AWS_SDK_VERSION}",
        "0eec78870b3d0abc509a847072cf963cb2ae6e360dc6161a9449b3398c470476",
    ),
    f"sdk-core-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:sdk-core:{AWS_SDK_VERSION}",
        "fa559a4ce598852f3519c8f3b36250f583b0858a7611eedc4a81997778c617f4",
    ),
    f"sts-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:sts:{AWS_SDK_VERSION}",
        "8d0f7816d3f96e3f00249f5d054d926e939a104bcf9ef57676ee0b16c59684d2",
    ),
    f"third-party-jackson-core-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:third-party-jackson-core:{AWS_SDK_VERSION}",
        "32f4252c6c2df8f3a4aff885e6dc77024ad6b4cb48455d07b461ec30c41643ea",
    ),
    f"utils-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:utils:{AWS_SDK_VERSION}",
        "642aeef536a071668f0b772f05f9d21573abf6955e7b6fb5fdb893760cca10e8",
    ),
    f"utils-lite-{AWS_SDK_VERSION}.jar": (
        f"software.amazon.awssdk:utils-lite:{AWS_SDK_VERSION}",
        "e004806def5e22ec98edc48a133ff3317166255e1ba29d93d129e9fdfa64a7be",
    ),
    "eventstream-1.0.1.jar": (
        "software.amazon.eventstream:eventstream:1.0.1",
        "0c37d8e696117f02c302191b8110b0d0eb20fa412fce34c3a269ec73c16ce822",
    ),
    "reactive-streams-1.0.4.jar": (
        "org.reactivestreams:reactive-streams:1.0.4",
        "f75ca597789b3dac58f61857b9ac2e1034a68fa672db35055a8fb4509e325f28",
    ),
}

# 36 jars, 12858213 bytes (12.86 MB)
